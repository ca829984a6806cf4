-- Per-minute rollup: the same columns as samples_1s, one row per (node, instance_id, minute),
-- recomputed by the collector from the deduplicated samples_1s rows of the minutes a flush
-- touched, right after those seconds. Same rule for readers: the row with the most samples.
CREATE TABLE IF NOT EXISTS samples_1m (
    time DateTime,
    node String,
    instance_id String,
    gpu_uuid String,
    gpu_index UInt32,
    model String,
    kind String,
    profile String,
    compute_slices UInt32,
    sm_count UInt32,
    gpu_sm_count UInt32,
    mem_total_bytes UInt64,
    gpu_mem_total_bytes UInt64,
    interval_ns UInt64,
    samples UInt64,
    covered_ns UInt64,
    sm_active_sum Float64,
    attached_sum UInt64,
    vgpu_switch_ns_sum UInt64,
    vgpu_run_ns_sum UInt64,
    first_attached_ns UInt64,
    mem_used_bytes_sum Float64,
    power_watts_sum Float64,
    wait_ns Array(UInt64),
    wait_count Array(UInt64)
) ENGINE = ReplacingMergeTree(samples)
PARTITION BY toYYYYMMDD(time)
ORDER BY (node, instance_id, time);
