-- Raw samples: one row per instance per tick, as the exporter produced them.
-- ReplacingMergeTree on (node, instance_id, ts_ns): a batch delivered twice collapses to one row;
-- queries deduplicate by ts_ns themselves and never rely on merges having happened.
CREATE TABLE IF NOT EXISTS samples (
    time DateTime,
    ts_ns UInt64,
    interval_ns UInt64,
    node String,
    gpu_uuid String,
    gpu_index UInt32,
    model String,
    kind String,
    instance_id String,
    profile String,
    attached UInt8,
    sm_active Float64,
    mem_used_bytes UInt64,
    mem_total_bytes UInt64,
    power_watts Float64,
    compute_slices UInt32,
    sm_count UInt32,
    gpu_sm_count UInt32,
    gpu_mem_total_bytes UInt64,
    vgpu_run_ns UInt64,
    vgpu_switch_ns UInt64,
    vgpu_waits_ns Array(UInt64)
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(time)
ORDER BY (node, instance_id, ts_ns);
