-- samples_1s / samples_1m: mem_used_max_bytes, the highest mem_used_bytes of the samples taken
-- in the row (README.md, "Right-sizing"): an allocation's memory need is the high-water mark of
-- its memory, which the sums cannot give, and the raw samples are deleted after their
-- retention. It merges with max(), like first_ns and last_ns with min() and max(): a minute's
-- is the highest of its seconds'. Rows written before this migration do not know their maximum;
-- they read the instance's whole memory (mem_total_bytes), the one bound that is never below
-- it, so that no older row makes an allocation look smaller than it was.
ALTER TABLE samples_1s ADD COLUMN mem_used_max_bytes UInt64 DEFAULT mem_total_bytes;
ALTER TABLE samples_1m ADD COLUMN mem_used_max_bytes UInt64 DEFAULT mem_total_bytes
