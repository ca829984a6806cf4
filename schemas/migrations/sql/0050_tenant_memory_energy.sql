-- The tenant report's memory efficiency and energy per allocation-minute (README.md, "The
-- tenant report"), summed like the other figures: mem_used_ns is the integral of memory used /
-- memory of the instance over mem_ns, the time it is known for (ns; each minute's mean over its
-- samples × the time they cover × the share of the minute billed), so a window's memory
-- efficiency is Σ mem_used_ns / Σ mem_ns; energy_j is the allocation's share of its GPU's energy
-- (J). attribution_hours holds their sums per hour. Rows written before this migration: none
-- known (0).
ALTER TABLE attribution_minutes ADD COLUMN mem_used_ns Float64 DEFAULT 0;
ALTER TABLE attribution_minutes ADD COLUMN mem_ns Float64 DEFAULT 0;
ALTER TABLE attribution_minutes ADD COLUMN energy_j Float64 DEFAULT 0;
ALTER TABLE attribution_hours ADD COLUMN mem_used_ns Float64 DEFAULT 0;
ALTER TABLE attribution_hours ADD COLUMN mem_ns Float64 DEFAULT 0;
ALTER TABLE attribution_hours ADD COLUMN energy_j Float64 DEFAULT 0
