-- samples_1s / samples_1m: first_ns and last_ns, the ts_ns of the first and the last sample the
-- row rolls up. A GPU is capacity from each of its samples for the presence period (README.md,
-- "Definitions"), so the capacity of a window needs the samples' own times, to the ns, at its
-- edges and at an outage's: from the rows' start alone, the rollups would bill another capacity
-- than the raw samples. Rows written before this migration: the row's start for both (their
-- samples' times are not known).
ALTER TABLE samples_1s ADD COLUMN first_ns UInt64 DEFAULT toUInt64(time) * 1000000000;
ALTER TABLE samples_1s ADD COLUMN last_ns UInt64 DEFAULT toUInt64(time) * 1000000000;
ALTER TABLE samples_1m ADD COLUMN first_ns UInt64 DEFAULT toUInt64(time) * 1000000000;
ALTER TABLE samples_1m ADD COLUMN last_ns UInt64 DEFAULT toUInt64(time) * 1000000000
