-- attribution_minutes: the instance each allocation was priced on (GPU model, MIG or vGPU
-- profile, billed fraction), so that the line items (`report --by allocation`) and the FOCUS
-- export (SkuId, PricingQuantity in GPU-hours of the fraction) come from the stored minutes as
-- they do from the samples. Rows written before this migration: empty model and profile,
-- fraction 0 (unknown).
ALTER TABLE attribution_minutes ADD COLUMN model String DEFAULT '';
ALTER TABLE attribution_minutes ADD COLUMN profile String DEFAULT '';
ALTER TABLE attribution_minutes ADD COLUMN fraction Float64 DEFAULT 0
