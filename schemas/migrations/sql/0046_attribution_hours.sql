-- attribution_hours: the stored minutes summed per UTC hour and allocation, so that reports,
-- FOCUS exports and the fleet over long windows read one row per allocation and hour instead of
-- sixty. Each row sums, over the minutes of its hour, the rows of each minute's latest pass
-- (one per allocation; a batch sent twice counted once), with attribution_minutes' column names:
-- sums (ns, money as exact Decimal sums, efficiency_ns, overhead_ns, waits merged with sumMap),
-- maxima (sliced, cold_start_ns, fraction) and the allocation's facts; minutes is how many
-- minutes of the hour the allocation has (for __unallocated__: the hour's attributed minutes).
--
-- The attribution service rolls an hour up again after each pass that stores minutes of it
-- (a recomputation, late data). source_ns and source_minutes are the hour's highest
-- computed_ns and number of stored minutes in attribution_minutes when it was rolled up:
-- readers use an hour's rows (those of its highest source_ns) only while both still match
-- attribution_minutes, and read the hour from its minutes otherwise, so the hourly rows can
-- never give another figure than the minutes.
CREATE TABLE IF NOT EXISTS attribution_hours (
    hour DateTime,
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
    active_ns Int64,
    list_cost Decimal(38, 12),
    cost Decimal(38, 12),
    waste_cost Decimal(38, 12),
    overhead_cost Decimal(38, 12),
    efficiency_ns Float64,
    overhead_ns Float64,
    cold_start_ns Int64,
    cold_start_sla_ns Int64,
    wait_ns Array(UInt64),
    wait_count Array(UInt64),
    currency String,
    model String,
    profile String,
    fraction Float64,
    minutes UInt64,
    source_ns UInt64,
    source_minutes UInt64
) ENGINE = ReplacingMergeTree(source_ns)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, tenant, allocation_id)
