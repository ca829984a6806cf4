-- The allocation audit trail (schemas/audit; README, "Allocation audit"): one row per
-- allocation write that changed something (create, change, delete), from any door (http,
-- import, kafka, kubernetes), with who made it, from where, and the allocation before and after
-- as JSON ('' before a create and after a delete). Rows are only ever added: nothing in
-- slicemeter updates or deletes them.
CREATE TABLE IF NOT EXISTS allocation_audit (
    time DateTime,
    at_ns Int64,
    door String,
    principal String,
    role String,
    origin String,
    action String,
    allocation_id String,
    tenant String,
    before_tenant String,
    version UInt64,
    before String,
    after String
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(time)
ORDER BY (allocation_id, at_ns)
