-- Per-second rollup of samples: one row per (node, instance_id, second), what attribution and
-- dashboards read instead of the raw 10 Hz samples.
--
-- Not a materialized view: an MV fires per inserted block, so a batch delivered twice would be
-- counted twice. The collector instead recomputes the seconds a flush touched from the
-- deduplicated raw samples (INSERT ... SELECT ... LIMIT 1 BY node, instance_id, ts_ns) before it
-- commits the Kafka offsets. Every recomputation writes the complete row of that second, and raw
-- data only grows, so the row with the most samples is the right one: ReplacingMergeTree(samples)
-- keeps it when parts merge, and readers take it without FINAL
-- (ORDER BY samples DESC LIMIT 1 BY node, instance_id, time, or argMax(..., samples)).
--
-- Sums and counts are mergeable by addition; the vGPU waits are an exact histogram
-- (wait_ns[i] occurred wait_count[i] times), mergeable with sumMap(wait_ns, wait_count).
-- first_attached_ns is the first ts_ns with attached = 1 in the second, 0 when none.
CREATE TABLE IF NOT EXISTS samples_1s (
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
