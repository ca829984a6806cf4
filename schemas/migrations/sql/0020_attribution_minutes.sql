-- Continuous attribution: one row per (minute, allocation) that the attribution service has
-- attributed, plus one row per minute for the unallocated capacity (tenant '__unallocated__',
-- allocation_id ''), so that the report of any window of whole minutes is computed from its
-- minutes alone: money and seconds are sums, efficiency is Σ efficiency_ns / Σ metered_ns, the
-- cold start the largest known (cold_start_ns -1: not known yet), the jitter p99 that of the
-- summed wait histograms (wait_ns[i] occurred wait_count[i] times, mergeable with sumMap).
--
-- A late sample or allocation makes the service recompute the minute: it writes every row of
-- the minute again with a higher computed_ns. Readers take, per minute, only the rows of its
-- highest computed_ns (an allocation deleted since then has no row in that pass), never FINAL;
-- ReplacingMergeTree(computed_ns) only saves space when parts merge.
CREATE TABLE IF NOT EXISTS attribution_minutes (
    minute DateTime,
    tenant String,
    allocation_id String,
    tier String,
    node String,
    instance_id String,
    requested_ns Int64,
    started_ns Int64,
    sliced UInt8,
    billed_ns Int64,
    metered_ns Int64,
    list_cost Float64,
    cost Float64,
    waste_cost Float64,
    overhead_cost Float64,
    efficiency_ns Float64,
    cold_start_ns Int64,
    cold_start_sla_ns Int64,
    wait_ns Array(UInt64),
    wait_count Array(UInt64),
    currency String,
    computed_ns UInt64
) ENGINE = ReplacingMergeTree(computed_ns)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, tenant, allocation_id);
