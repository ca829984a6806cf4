-- attribution_minutes.overhead_ns: the allocation's overhead fraction o times its metered ns in
-- the minute (for a vGPU Σ switch share × covered ns). A window's o is Σ overhead_ns /
-- Σ metered_ns, and its waste cost × (1 − o) × (measured / billed) × (1 − efficiency) is
-- computed from the sums, as from the samples: summing each minute's waste would weight the
-- minutes' own o and give another bill. Rows written before this migration: o from their
-- overhead cost.
ALTER TABLE attribution_minutes ADD COLUMN overhead_ns Float64 DEFAULT if(cost > 0, overhead_cost / cost, 0) * metered_ns
