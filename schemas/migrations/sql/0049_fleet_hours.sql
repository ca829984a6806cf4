-- fleet_hours: what the fleet report reads of samples_1m, summed per UTC hour and instance, so
-- that a month of the fleet reads one row per instance and hour instead of sixty. Each row sums
-- the fullest version (FINAL) of each of the instance's samples_1m rows of the hour, as the
-- fleet sums them (attribution/store/fleet.go): covered_ns, sm_active_ns, mem_used_ns (Σ mean
-- memory used / memory of the instance × covered ns), mem_held (Σ memory used / memory of the
-- instance over its samples), attached (Σ attached_sum) and energy_j (Σ mean power × covered
-- seconds); and its latest facts (those of its row at last_time, the hour's latest).
--
-- The attribution service rolls an hour up after each pass that completes or recomputes it,
-- and again once its samples_1m parts have changed (late samples, a merge). sample_block, sample_first and
-- sample_last are, when it was rolled up, of the active parts of samples_1m with rows in the
-- hour (system.parts, by their min_time and max_time): the highest block number (or mutation
-- version), and the first and last row time (Unix seconds) within the hour; an insert of rows
-- of the hour raises the first, a dropped partition or expired rows move the others.
-- source_ns and source_minutes are the hour's highest computed_ns and number of stored minutes
-- in attribution_minutes, as in attribution_hours. rolled_ns tells the roll-ups of an hour
-- apart: readers use an hour's rows of its highest rolled_ns only while the hour's sources are
-- still those (for the instances the parts, for the energy split the parts and the minutes),
-- and read the hour from samples_1m otherwise, so the hourly rows never give another figure
-- than the minutes.
CREATE TABLE IF NOT EXISTS fleet_hours (
    hour DateTime,
    node String,
    instance_id String,
    last_time DateTime,
    gpu_uuid String,
    model String,
    kind String,
    profile String,
    compute_slices UInt32,
    sm_count UInt32,
    gpu_sm_count UInt32,
    mem_total_bytes UInt64,
    gpu_mem_total_bytes UInt64,
    share_replicas UInt32,
    covered_ns UInt64,
    sm_active_ns Float64,
    mem_used_ns Float64,
    mem_held Float64,
    attached UInt64,
    energy_j Float64,
    rolled_ns UInt64,
    sample_block UInt64,
    sample_first UInt64,
    sample_last UInt64,
    source_ns UInt64,
    source_minutes UInt64
) ENGINE = ReplacingMergeTree(rolled_ns)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, node, instance_id);
-- fleet_hour_tenants: per UTC hour, instance and tenant, the energy of the instance's GPU in
-- the minutes the tenant is billed there (J, before the instance's billed fraction), summed per
-- minute before the hour: Σ over the hour's minutes of the GPU's power × covered time × the share
-- of the minute billed to the tenant (the latest pass of each minute). Written by the roll-up of
-- the hour before its fleet_hours rows, with the same rolled_ns: readers take the rows of the
-- rolled_ns of the fleet_hours rows they use, so a roll-up cut short between the two is never read.
CREATE TABLE IF NOT EXISTS fleet_hour_tenants (
    hour DateTime,
    node String,
    instance_id String,
    tenant String,
    energy_j Float64,
    rolled_ns UInt64
) ENGINE = ReplacingMergeTree(rolled_ns)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, node, instance_id, tenant);
-- fleet_hour_gpus: per UTC hour and GPU (node, gpu_uuid, model), the first and the last sample's
-- ts_ns of its samples_1m rows of the hour (every version: a row's incomplete versions roll up
-- fewer of its samples), the GPU's presence as the fleet's capacity reads it in buckets of whole
-- hours. Written by the roll-up of the hour before its fleet_hours rows, with the same rolled_ns,
-- and read, like fleet_hour_tenants, only with them.
CREATE TABLE IF NOT EXISTS fleet_hour_gpus (
    hour DateTime,
    node String,
    gpu_uuid String,
    model String,
    first_ns Int64,
    last_ns Int64,
    rolled_ns UInt64
) ENGINE = ReplacingMergeTree(rolled_ns)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, node, gpu_uuid, model)
