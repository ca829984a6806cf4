-- Metered time is the measure of the union of the sample intervals, never their sum: samples
-- that overlap (a clock step, a duplicate with another interval) cover their union once. A
-- rollup row [time, time + 1 s or 1 min) now holds the pieces of the samples that cover part of
-- it, each sample's [ts, ts + interval) cut at the row's bounds, so that a union is additive
-- over rows: covered_ns is the union of the row's pieces, active_ns that of its measured ones.
-- samples and the per-sample sums (sm_active_sum, active_samples, attached_sum, the vGPU sums,
-- memory, power, waits, first_attached_ns) stay those of the samples taken in the row (ts in
-- it): a row may be covered by a sample taken before it and have none (samples 0). A
-- recomputation that only sees more of the pieces keeps the version (samples): of equal
-- versions ReplacingMergeTree and FINAL keep the last written, the most complete.
--
-- piece_ns, active_piece_ns: Σ of the pieces' lengths, all and measured; sm_active_ns:
-- Σ sm_active × measured piece; switch_ns: Σ vgpu_switch_ns / interval_ns × piece. Per
-- allocation-minute attribution divides sm_active_ns by active_piece_ns and switch_ns by
-- piece_ns (the time-weighted mean sm_active and switch share) and weighs them by the unions. Rows written
-- before this migration had no overlaps counted apart: their sums stand for both.
ALTER TABLE samples_1s ADD COLUMN piece_ns UInt64 DEFAULT covered_ns;
ALTER TABLE samples_1s ADD COLUMN active_piece_ns UInt64 DEFAULT active_ns;
ALTER TABLE samples_1s ADD COLUMN sm_active_ns Float64 DEFAULT if(active_samples > 0, sm_active_sum / active_samples, 0) * active_ns;
ALTER TABLE samples_1s ADD COLUMN switch_ns Float64 DEFAULT toFloat64(vgpu_switch_ns_sum);
ALTER TABLE samples_1m ADD COLUMN piece_ns UInt64 DEFAULT covered_ns;
ALTER TABLE samples_1m ADD COLUMN active_piece_ns UInt64 DEFAULT active_ns;
ALTER TABLE samples_1m ADD COLUMN sm_active_ns Float64 DEFAULT if(active_samples > 0, sm_active_sum / active_samples, 0) * active_ns;
ALTER TABLE samples_1m ADD COLUMN switch_ns Float64 DEFAULT toFloat64(vgpu_switch_ns_sum)
