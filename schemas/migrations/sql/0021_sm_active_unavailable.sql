-- Samples whose sm_active could not be measured (a MIG instance on a GPU without GPM, before
-- Hopper; Sample.sm_active_unavailable on the wire). Such time is metered but says nothing
-- about use: attribution leaves it out of efficiency and waste instead of reading its 0 as idle.
--
-- samples.sm_active_unavailable: 1 when not measured (rows written before this migration: 0).
-- samples_1s / samples_1m: active_samples and active_ns count and cover only the measured
-- samples of the row (sm_active_sum already sums only those, the others being 0); rows written
-- before this migration were all measured, hence the defaults.
-- attribution_minutes.active_ns: the metered ns whose activity was measured, which efficiency_ns
-- is a sum over (so efficiency = Σ efficiency_ns / Σ active_ns).
ALTER TABLE samples ADD COLUMN sm_active_unavailable UInt8 DEFAULT 0;
ALTER TABLE samples_1s ADD COLUMN active_samples UInt64 DEFAULT samples;
ALTER TABLE samples_1s ADD COLUMN active_ns UInt64 DEFAULT covered_ns;
ALTER TABLE samples_1m ADD COLUMN active_samples UInt64 DEFAULT samples;
ALTER TABLE samples_1m ADD COLUMN active_ns UInt64 DEFAULT covered_ns;
ALTER TABLE attribution_minutes ADD COLUMN active_ns Int64 DEFAULT metered_ns
