-- Allocation events; the highest version of an allocation_id is the current state.
CREATE TABLE IF NOT EXISTS allocations (
    allocation_id String,
    tenant String,
    tier String,
    node String,
    instance_id String,
    requested_ns Int64,
    started_ns Int64,
    ended_ns Int64,
    version UInt64,
    deleted UInt8,
    received DateTime
) ENGINE = ReplacingMergeTree(version)
ORDER BY allocation_id;
