-- Money in attribution_minutes as Decimal(38, 12): the report of a window is the sum of its
-- minutes, and a sum of floating-point amounts over a month drifts in the last digits and
-- depends on the order of the summands; Decimal sums are exact and the same on every path.
-- Ratios and the ns-weighted sums (efficiency_ns, overhead_ns) stay Float64.
--
-- overhead_ns's default (rows written before 0022) read overhead_cost / cost as floats; it is
-- restated first with explicit conversions, as Decimal / Decimal would not mix with its
-- Float64 arithmetic. ClickHouse 18.16 takes Decimal columns without any setting.
ALTER TABLE attribution_minutes MODIFY COLUMN overhead_ns Float64 DEFAULT if(toFloat64(cost) > 0, toFloat64(overhead_cost) / toFloat64(cost), 0) * metered_ns;
ALTER TABLE attribution_minutes MODIFY COLUMN list_cost Decimal(38, 12);
ALTER TABLE attribution_minutes MODIFY COLUMN cost Decimal(38, 12);
ALTER TABLE attribution_minutes MODIFY COLUMN waste_cost Decimal(38, 12);
ALTER TABLE attribution_minutes MODIFY COLUMN overhead_cost Decimal(38, 12)
