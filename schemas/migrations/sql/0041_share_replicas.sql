-- Share instances (kind share: a time-sliced or MPS replica of a GPU, Sample.share_replicas on
-- the wire) are billed 1/share_replicas of their GPU. The count cannot be derived from the
-- memory columns (an 80 GB GPU in 3 replicas does not divide evenly), so it is stored, in the
-- samples and in both rollups, which attribution reads the instance's facts from.
--
-- share_replicas: the replicas of the instance's GPU on a share instance; 0 on every other kind
-- (and on rows written before this migration, none of which was a share instance).
ALTER TABLE samples ADD COLUMN share_replicas UInt32 DEFAULT 0;
ALTER TABLE samples_1s ADD COLUMN share_replicas UInt32 DEFAULT 0;
ALTER TABLE samples_1m ADD COLUMN share_replicas UInt32 DEFAULT 0
