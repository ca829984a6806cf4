-- Closed billing periods (slicemeter period close; attribution/period). A period is a calendar
-- month in the price book's time zone; closing it stores its tenant report once, as rendered
-- (CSV bytes, read back byte-identical by `period show`), with its totals as Decimal.
--
-- billing_periods: one row per close. Closing is refused once a period has a row; two closers
-- racing may both write version 1, and readers take the earliest closed_ns of the highest
-- version (LIMIT 1 BY period), so every reader sees the same close.
CREATE TABLE IF NOT EXISTS billing_periods (
    period String,
    version UInt32,
    timezone String,
    window_start DateTime,
    window_end DateTime,
    closed_ns UInt64,
    report String,
    currency String,
    list_cost Decimal(38, 12),
    cost Decimal(38, 12),
    waste_cost Decimal(38, 12),
    overhead_cost Decimal(38, 12),
    unallocated_list_cost Decimal(38, 12),
    correction_cost Decimal(38, 12)
) ENGINE = MergeTree()
ORDER BY (period, version, closed_ns);
-- billing_period_lines: the amounts of a close per tenant and tier, as Decimal: the period's
-- own rows (corrects '') and its correction lines for earlier closed periods (corrects
-- 'YYYY-MM'). What a closed period was billed in all is the sum of the lines that are its own
-- or correct it, which the next close compares with its recomputed report.
CREATE TABLE IF NOT EXISTS billing_period_lines (
    period String,
    closed_ns UInt64,
    corrects String,
    tenant String,
    tier String,
    allocated_ns Int64,
    unmetered_ns Int64,
    list_cost Decimal(38, 12),
    cost Decimal(38, 12),
    waste_cost Decimal(38, 12),
    overhead_cost Decimal(38, 12),
    currency String
) ENGINE = MergeTree()
ORDER BY (period, closed_ns, corrects, tenant, tier)
