-- attribution_hour_hosts: per UTC hour and node, the most tenants billed on the node within
-- one minute of the hour (the fleet's blast radius), from the same latest passes as the
-- attribution_hours rows of the hour with the same source_ns. The service writes these rows
-- before the hour's attribution_hours rows, and readers take them only for hours whose
-- attribution_hours rows they use (same hour and source_ns), so a roll-up cut short between
-- the two inserts is never read.
CREATE TABLE IF NOT EXISTS attribution_hour_hosts (
    hour DateTime,
    node String,
    max_tenants UInt64,
    source_ns UInt64
) ENGINE = ReplacingMergeTree(source_ns)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, node)
