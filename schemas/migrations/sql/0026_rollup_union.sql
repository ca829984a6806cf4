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
-- Where samples overlap, each instant counts once, with the mean of the samples covering it:
-- sm_active_ns is the integral over the measured covered time of the mean sm_active of the
-- measured samples covering each instant, switch_ns that over the covered time of the mean
-- vgpu_switch_ns / interval_ns (with no overlap: Σ sm_active × covered, Σ switch share ×
-- covered). Both add up over rows like the unions. Rows written before this migration: what
-- their sums meant then.
ALTER TABLE samples_1s ADD COLUMN sm_active_ns Float64 DEFAULT if(active_samples > 0, sm_active_sum / active_samples, 0) * active_ns;
ALTER TABLE samples_1s ADD COLUMN switch_ns Float64 DEFAULT toFloat64(vgpu_switch_ns_sum);
ALTER TABLE samples_1m ADD COLUMN sm_active_ns Float64 DEFAULT if(active_samples > 0, sm_active_sum / active_samples, 0) * active_ns;
ALTER TABLE samples_1m ADD COLUMN switch_ns Float64 DEFAULT toFloat64(vgpu_switch_ns_sum)
