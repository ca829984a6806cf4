-- Energy from NVML's total energy counter (nvmlDeviceGetTotalEnergyConsumption), not mean power
-- × time (README.md, "Fleet economics"): the power is one reading per tick, the counter
-- integrates what the GPU drew between the reads. A sample carries the counter at its tick and
-- at the previous tick of the same GPU (Sample.energy_mj, energy_prev_mj), so the collector
-- computes each sample's energy from the sample alone (schemas/energy: the increase; the
-- reading after a counter reset; power × interval, flagged estimated, where the counter is
-- missing) and stores it: every reader sums the same per-sample joules.
--
-- samples: energy_counter_mj, the counter at the tick (mJ, GPU-level; 0 when not read);
-- energy_j, the GPU's energy during the sample's tick (J); energy_estimated, 1 where energy_j
-- is power × interval. Rows written before this migration: power × interval (the interval
-- clamped to 60 s, as every reader clamps it), estimated.
ALTER TABLE samples ADD COLUMN energy_counter_mj UInt64 DEFAULT 0;
ALTER TABLE samples ADD COLUMN energy_j Float64 DEFAULT power_watts * least(interval_ns, 60000000000) / 1000000000;
ALTER TABLE samples ADD COLUMN energy_estimated UInt8 DEFAULT 1;
-- samples_1s / samples_1m: energy_j_sum, Σ energy_j of the samples taken in the row (it adds
-- over seconds and minutes like power_watts_sum), and energy_estimated_samples, how many of
-- them were estimated. Rows written before this migration: the row's mean power × the time
-- its samples cover (what attribution computed before), all of them estimated.
ALTER TABLE samples_1s ADD COLUMN energy_j_sum Float64 DEFAULT if(samples > 0, power_watts_sum / samples, 0) * covered_ns / 1000000000;
ALTER TABLE samples_1s ADD COLUMN energy_estimated_samples UInt64 DEFAULT samples;
ALTER TABLE samples_1m ADD COLUMN energy_j_sum Float64 DEFAULT if(samples > 0, power_watts_sum / samples, 0) * covered_ns / 1000000000;
ALTER TABLE samples_1m ADD COLUMN energy_estimated_samples UInt64 DEFAULT samples
