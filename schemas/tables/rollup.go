package tables

import "strings"

// Metered time is the measure of the union of the samples' intervals [ts, ts + interval),
// never their sum (attribution/README.md, "Definitions"): samples that overlap (a clock step, a duplicate
// with another interval) cover their union once. A union is additive over disjoint slices of
// time, so each rollup row holds the pieces of the samples inside its own second: a sample is
// cut at the seconds it spans, the row's covered_ns is the union of its pieces, and the
// covered time of any run of rows is the sum of theirs.

// MaxInterval is the longest interval a sample covers, in ns: every door refuses longer ones,
// and readers clamp to it (a stored 10-year interval would otherwise meter whole minutes, and
// cut into a row per second it spans).
//
// Where samples overlap, each instant counts once, with the mean of the samples covering it:
// the time-weighted means (sm_active, the vGPU switch share) are integrals of those means
// over the covered time, additive like the union itself, and with no overlap the plain
// Σ value × covered time.
const MaxInterval = "60000000000"

// Sweep is the SELECT items, aliased prefix_union and prefix_integral, of an event sweep over
// the intervals [starts[i], ends[i]) (arrays of non-negative Int64 offsets below 2^40) carrying
// values[i] (Float64; fewer than 2^20 intervals, at most one per starts index): the measure of their union, and the integral
// over it of the mean value of the intervals covering each instant. Both are additive over
// disjoint slices of time, and with no overlap the integral is Σ value × length.
//
// An event is (2 × time + 1 for a start, 0 for an end) × 2^21 + its index in starts ++ ends:
// sorted, ends come before starts at one instant (touching intervals meet without a gap or a
// double count), and the keys are distinct, so the ±values sort along by them (ClickHouse 18.16
// does not see a column used only inside a lambda, so none is captured). The running sums of
// ±1 and ±value are how many intervals cover each stretch between two events and the sum of
// their values. Its other aliases (prefix_*) and its lambdas' parameters (sweep_*) are its own.
func Sweep(prefix, starts, ends, values string) string {
	r := strings.NewReplacer("{{p}}", prefix, "{{s}}", starts, "{{e}}", ends, "{{v}}", values)
	return r.Replace(`arrayConcat(
            arrayMap((sweep_x, sweep_i) -> (sweep_x * 2 + 1) * 2097152 + sweep_i, {{s}}, arrayEnumerate({{s}})),
            arrayMap((sweep_x, sweep_i) -> sweep_x * 4194304 + 1048576 + sweep_i, {{e}}, arrayEnumerate({{e}}))) AS {{p}}_ev,
        arraySort({{p}}_ev) AS {{p}}_sorted,
        arrayMap(sweep_e -> intDiv(sweep_e, 4194304), {{p}}_sorted) AS {{p}}_t,
        arrayCumSum(arrayMap(sweep_e -> if(intDiv(sweep_e, 2097152) % 2 = 1, 1, -1), {{p}}_sorted)) AS {{p}}_k,
        arrayCumSum(arraySort((sweep_v, sweep_key) -> sweep_key, arrayConcat({{v}}, arrayMap(sweep_x -> -sweep_x, {{v}})), {{p}}_ev)) AS {{p}}_s,
        arraySum(arrayMap((sweep_a, sweep_b, sweep_k) -> if(sweep_k > 0, sweep_b - sweep_a, 0),
            arrayPopBack({{p}}_t), arrayPopFront({{p}}_t), arrayPopBack({{p}}_k))) AS {{p}}_union,
        arraySum(arrayMap((sweep_a, sweep_b, sweep_k, sweep_v) -> if(sweep_k > 0, (sweep_b - sweep_a) * sweep_v / sweep_k, 0.),
            arrayPopBack({{p}}_t), arrayPopFront({{p}}_t), arrayPopBack({{p}}_k), arrayPopBack({{p}}_s))) AS {{p}}_integral`)
}

// Coverage is the SELECT items, aliased prefix_union and prefix_integral, of Sweep's union and
// integral over the intervals [starts[i], ends[i]) carrying values[i], when sums already give
// them: where regular (a condition the caller computed) holds, no two of the intervals
// overlap, and lengths (Σ ends − starts) and weighted (Σ values × length), aggregates the
// caller computed over the same intervals, are the union and the integral. Only the other
// groups are swept: sorting costs ClickHouse 18.16 a virtual comparison per step, and it
// evaluates both branches of an if, so regular groups sweep empty arrays.
func Coverage(prefix, starts, ends, values, lengths, weighted, regular string) string {
	r := strings.NewReplacer("{{p}}", prefix, "{{s}}", starts, "{{e}}", ends, "{{v}}", values, "{{len}}", lengths,
		"{{w}}", weighted, "{{regular}}", regular)
	return r.Replace(`if({{regular}}, emptyArrayInt64(), {{s}}) AS {{p}}_os, if({{regular}}, emptyArrayInt64(), {{e}}) AS {{p}}_oe,
        if({{regular}}, emptyArrayFloat64(), {{v}}) AS {{p}}_ov,
        `) + Sweep(prefix+"_sw", prefix+"_os", prefix+"_oe", prefix+"_ov") + r.Replace(`,
        if({{regular}}, toInt64({{len}}), {{p}}_sw_union) AS {{p}}_union,
        if({{regular}}, toFloat64({{w}}), {{p}}_sw_integral) AS {{p}}_integral`)
}

// Regular is the aggregate condition, over rows of the pieces of distinct samples (t: ts_ns,
// iv: the interval, both Int64) one piece each, under which no two pieces overlap: the samples
// share one interval and one phase, so their starts lie a whole number of intervals apart.
// It holds for an exporter sampling at start + n·interval; a clock step or a changed interval
// breaks it, and Coverage then sweeps.
const Regular = "min(iv) = max(iv) AND min(t % iv) = max(t % iv)"

// RollupSeconds is the INSERT of samples_1s rows recomputed from the deduplicated samples
// (FINAL: of the copies of one sample key the one received last, as every reader of samples
// keeps). samples is a condition on the samples read (it must select every sample that covers
// part of a recomputed second: up to MaxInterval before it), seconds one on the recomputed
// seconds (sec, a DateTime). samples and the per-sample sums count the samples taken in the
// row (ts in it); covered_ns, active_ns, sm_active_ns and switch_ns sweep the pieces (Sweep).
// mem_used_max_bytes is the highest mem_used_bytes of the samples taken in it (0 when none);
// energy_j_sum and energy_estimated_samples sum and count the stored per-sample energy of them.
// first_ns and last_ns are the first and last ts_ns of the samples taken in it, or, in a row
// only covered by samples taken before it, of those: real samples either way, for the
// capacity's presence, which reads every row.
func RollupSeconds(samples, seconds string) string {
	return Insert(Samples1s, RollupColumns) + `
SELECT sec, node, instance_id, r_gpu_uuid, r_gpu_index, r_model, r_kind, r_profile, r_compute_slices, r_sm_count,
    r_gpu_sm_count, r_mem_total_bytes, r_gpu_mem_total_bytes, r_interval_ns, samples, toUInt64(u_union),
    sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum, first_attached_ns, mem_used_bytes_sum, power_watts_sum,
    wait_ns, wait_count, active_samples, toUInt64(a_union), first_ns, last_ns, a_integral, u_integral, r_share_replicas,
    mem_used_max_bytes, energy_j_sum, energy_estimated_samples
FROM (
    SELECT *,
        ` + Coverage("u", "los", "his", "os", "u_len", "u_weighted", "regular") + `,
        ` + Coverage("a", "alos", "ahis", "sms", "a_len", "a_weighted", "regular") + `
    FROM (
        SELECT sec, node, instance_id, any(gpu_uuid) AS r_gpu_uuid, any(gpu_index) AS r_gpu_index, any(model) AS r_model,
            any(kind) AS r_kind, any(profile) AS r_profile, any(compute_slices) AS r_compute_slices, any(sm_count) AS r_sm_count,
            any(gpu_sm_count) AS r_gpu_sm_count, any(mem_total_bytes) AS r_mem_total_bytes,
            any(gpu_mem_total_bytes) AS r_gpu_mem_total_bytes, any(interval_ns) AS r_interval_ns,
            any(share_replicas) AS r_share_replicas,
            countIf(taken_here) AS samples, groupArray(lo) AS los, groupArray(hi) AS his, groupArray(o_tick) AS os,
            groupArrayIf(lo, measured) AS alos, groupArrayIf(hi, measured) AS ahis, groupArrayIf(sm_active, measured) AS sms,
            sumIf(sm_active, measured AND taken_here) AS sm_active_sum, sumIf(toUInt64(attached), taken_here) AS attached_sum,
            sumIf(vgpu_switch_ns, taken_here) AS vgpu_switch_ns_sum, sumIf(vgpu_run_ns, taken_here) AS vgpu_run_ns_sum,
            minIf(ts_ns, attached = 1 AND taken_here) AS first_attached_ns,
            sumIf(toFloat64(mem_used_bytes), taken_here) AS mem_used_bytes_sum, sumIf(power_watts, taken_here) AS power_watts_sum,
            maxIf(mem_used_bytes, taken_here) AS mem_used_max_bytes,
            sumIf(energy_j, taken_here) AS energy_j_sum, countIf(energy_estimated = 1 AND taken_here) AS energy_estimated_samples,
            tupleElement(sumMap(ws, cs), 1) AS wait_ns, tupleElement(sumMap(ws, cs), 2) AS wait_count,
            countIf(measured AND taken_here) AS active_samples,
            sum(hi - lo) AS u_len, sum(o_tick * (hi - lo)) AS u_weighted,
            sumIf(hi - lo, measured) AS a_len, sumIf(sm_active * (hi - lo), measured) AS a_weighted,
            ` + Regular + ` AS regular,
            if(samples > 0, minIf(ts_ns, taken_here), min(ts_ns)) AS first_ns,
            if(samples > 0, maxIf(ts_ns, taken_here), max(ts_ns)) AS last_ns
        FROM (
            SELECT node, instance_id, gpu_uuid, gpu_index, model, kind, profile, compute_slices, sm_count, gpu_sm_count,
                mem_total_bytes, gpu_mem_total_bytes, interval_ns, ts_ns, sm_active, attached, vgpu_switch_ns, vgpu_run_ns,
                mem_used_bytes, power_watts, share_replicas, energy_j, energy_estimated, ` + Measured + ` AS measured,
                toInt64(least(interval_ns, ` + MaxInterval + `)) AS iv, if(iv > 0, vgpu_switch_ns / iv, 0.) AS o_tick,
                toInt64(ts_ns) AS t, intDiv(t, 1000000000) AS first_sec,
                arrayJoin(arrayMap(i -> first_sec + i, range(toUInt64(intDiv(t + iv - 1, 1000000000) - first_sec + 1)))) AS sec_n,
                toDateTime(sec_n) AS sec,
                greatest(t, sec_n * 1000000000) - sec_n * 1000000000 AS lo,
                least(t + iv, (sec_n + 1) * 1000000000) - sec_n * 1000000000 AS hi,
                sec_n = first_sec AS taken_here,
                if(taken_here, vgpu_waits_ns, emptyArrayUInt64()) AS ws, arrayMap(w -> toUInt64(1), ws) AS cs
            FROM ` + Final(Samples) + `
            WHERE ` + samples + `
        )
        WHERE iv > 0 AND ` + seconds + `
        GROUP BY node, instance_id, sec
    )
)`
}

// RollupMinutes is the INSERT of samples_1m rows recomputed from the complete (most samples;
// of equals, the last written) samples_1s row of each second, the row attribution reads
// (Final). seconds is a condition on the samples_1s rows read (whole minutes of them). Rows
// never straddle a minute, so every sum, the unions included, is the sum of its seconds, and
// the memory's high-water mark the highest of its seconds'.
func RollupMinutes(seconds string) string {
	return Insert(Samples1m, RollupColumns) + `
SELECT toStartOfMinute(time) AS minute, node, instance_id, any(gpu_uuid), any(gpu_index), any(model),
    any(kind), any(profile), any(compute_slices), any(sm_count), any(gpu_sm_count),
    any(mem_total_bytes), any(gpu_mem_total_bytes), any(interval_ns),
    sum(samples), sum(covered_ns), sum(sm_active_sum), sum(attached_sum), sum(vgpu_switch_ns_sum),
    sum(vgpu_run_ns_sum), minIf(first_attached_ns, first_attached_ns > 0), sum(mem_used_bytes_sum),
    sum(power_watts_sum),
    tupleElement(sumMap(wait_ns, wait_count), 1), tupleElement(sumMap(wait_ns, wait_count), 2),
    sum(active_samples), sum(active_ns),
    if(sum(samples) > 0, minIf(first_ns, samples > 0), min(first_ns)),
    if(sum(samples) > 0, maxIf(last_ns, samples > 0), max(last_ns)), sum(sm_active_ns), sum(switch_ns),
    any(share_replicas), max(mem_used_max_bytes), sum(energy_j_sum), sum(energy_estimated_samples)
FROM (
    SELECT ` + List(RollupColumns) + `
    FROM ` + Final(Samples1s) + `
    WHERE ` + seconds + `
)
GROUP BY node, instance_id, minute`
}
