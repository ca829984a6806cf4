-- samples_1s sorted by time first: ORDER BY (time, node, instance_id), was (node, instance_id,
-- time). Attribution reads a minute (or the hour of presence before it) of every instance; with
-- the node first, a time range pruned only whole days (the partitions) and the granules that
-- hold a single instance, so a minute read the day so far and its cost grew with the history
-- kept. Time first, a minute reads the granules of that minute. The row identity is the same
-- columns, so ReplacingMergeTree(samples) keeps the same row of each key, and readers
-- (LIMIT 1 BY, argMax, FINAL) need no change. samples_1m stays node-first: it is 60× smaller.
--
-- ClickHouse 18.16 cannot change a sorting key in place: the table is copied into a new one,
-- the rows the collectors wrote while it ran are copied again (the last ten minutes before the
-- copy's newest second onwards: duplicates of a row are the same version, and readers keep
-- one), and the two are swapped in one RENAME. If this is interrupted, running it again is
-- safe: a statement before a RENAME that already took effect is skipped (migrations.apply),
-- a copy run twice only duplicates rows, and the old table is dropped last. Rows a collector
-- writes in the moment between the second copy and the swap are not in the new table (the
-- collector recomputes only the seconds of its next flushes): migrate before the collectors
-- start (a collector migrates at start, before it consumes), or stop them while it runs.
CREATE TABLE IF NOT EXISTS samples_1s_by_time AS samples_1s
ENGINE = ReplacingMergeTree(samples)
PARTITION BY toYYYYMMDD(time)
ORDER BY (time, node, instance_id);
INSERT INTO samples_1s_by_time (time, node, instance_id, gpu_uuid, gpu_index, model, kind, profile,
    compute_slices, sm_count, gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns,
    samples, covered_ns, sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum,
    first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count, active_samples,
    active_ns, first_ns, last_ns, sm_active_ns, switch_ns, share_replicas)
SELECT time, node, instance_id, gpu_uuid, gpu_index, model, kind, profile,
    compute_slices, sm_count, gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns,
    samples, covered_ns, sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum,
    first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count, active_samples,
    active_ns, first_ns, last_ns, sm_active_ns, switch_ns, share_replicas
FROM samples_1s;
INSERT INTO samples_1s_by_time (time, node, instance_id, gpu_uuid, gpu_index, model, kind, profile,
    compute_slices, sm_count, gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns,
    samples, covered_ns, sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum,
    first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count, active_samples,
    active_ns, first_ns, last_ns, sm_active_ns, switch_ns, share_replicas)
SELECT time, node, instance_id, gpu_uuid, gpu_index, model, kind, profile,
    compute_slices, sm_count, gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns,
    samples, covered_ns, sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum,
    first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count, active_samples,
    active_ns, first_ns, last_ns, sm_active_ns, switch_ns, share_replicas
FROM samples_1s
WHERE time >= (SELECT max(time) FROM samples_1s_by_time) - 600;
RENAME TABLE samples_1s TO samples_1s_by_node, samples_1s_by_time TO samples_1s;
DROP TABLE IF EXISTS samples_1s_by_node
