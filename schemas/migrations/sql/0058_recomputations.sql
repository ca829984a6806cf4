-- The recomputations of stored minutes that the attribution service owes (attribution/service):
-- a change that makes stored minutes stale (an allocation received late or changed, a price
-- book change) or minutes with no stored pass (holes) is recorded here before any minute is
-- rewritten, so that a restarted service, or the replica that owns the nodes after a
-- rebalance, finishes it. Rows are only appended; of each (id, node) the row with the highest
-- updated_ns is the state.
--
-- node = '': the record: reason (allocation, price_book, missing), what (the allocations, the
-- book's hash, for logs), nodes (the nodes whose minutes are stale; empty: every node),
-- [from_ns, to_ns) the minutes to attribute again, and next_ns how far that has come (done once
-- it reaches to_ns). node != '': with several replicas, how far the recomputation came for
-- that node (next_ns); the record is done once every one of its nodes reached to_ns.
CREATE TABLE IF NOT EXISTS recomputations (
    id String,
    node String,
    reason String,
    what String,
    nodes Array(String),
    from_ns Int64,
    to_ns Int64,
    next_ns Int64,
    updated_ns UInt64
) ENGINE = MergeTree()
ORDER BY (id, node, updated_ns)
