-- The dialect slicemeter's migrations use: MergeTree partitioned by day, explicit INSERT columns.
CREATE TABLE IF NOT EXISTS samples_check (
    time DateTime,
    ts_ns UInt64,
    node String,
    instance_id String,
    sm_active Float64,
    vgpu_waits_ns Array(UInt64)
) ENGINE = MergeTree()
PARTITION BY toYYYYMMDD(time)
ORDER BY (node, instance_id, ts_ns);

INSERT INTO samples_check (time, ts_ns, node, instance_id, sm_active, vgpu_waits_ns)
VALUES (toDateTime('2026-01-02 03:04:05'), 1767323045000000000, 'node-a', 'gpu0', 0.5, [1, 2]);

-- ; inside a comment at the end of a line does not split;
SELECT node, count(), sum(sm_active)
FROM samples_check
GROUP BY node;
