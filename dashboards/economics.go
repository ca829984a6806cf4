package dashboards

//lint:file-ignore SA1019 the v1 dashboard schema imports into Grafana 11 and 12; dashboardv2 only into 12.

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// rollupFinal reads the per-minute rollup's fullest rows (tables.Final) of the time range.
var rollupFinal = tables.Final(tables.Samples1m) + ` WHERE $__timeFilter(time)`

// billedMinutes are the tenants' rows of the stored minutes the fleet report sums for what is
// billed (store's heldQuery): each minute's latest pass, a row stored twice counted once.
var billedMinutes = tables.Final(tables.AttributionMinutes) + `
  WHERE ` + tables.LatestPass(minutesWindow) + ` AND tenant != '__unallocated__'`

// smShare counts an instance's activity in whole-GPU units (a MIG instance's by its SMs).
const smShare = `if(kind = 'mig' AND gpu_sm_count > 0, sm_count / gpu_sm_count, 1)`

// economics is the operator's business view: what `slicemeter fleet` reports, over time.
func economics() *dashboard.DashboardBuilder {
	return newDashboard("slicemeter-fleet-economics", "slicemeter / Fleet economics",
		"How full the fleet is, how much VRAM sits idle, whether it makes money, the blast radius of a host and stranded MIG slices (slicemeter fleet).", prometheusAndClickHouse, "fleet", "economics").
		WithRow(dashboard.NewRowBuilder("Utilization")).
		WithPanel(promSeries("Allocation and active ratio by model (trailing window)", "percentunit",
			promQuery{`max by (model) (slicemeter_fleet_allocation_ratio)`, "allocated {{model}}"},
			promQuery{`max by (model) (slicemeter_fleet_active_ratio)`, "active {{model}}"})).
		WithPanel(chSeries("Sampled, allocated and active GPU-hours per hour", "short", `SELECT t, sampled, allocated, active
FROM (
  SELECT toStartOfHour(time) AS t, uniqExact(node, gpu_uuid, time) / 60 AS sampled,
    sum(sm_active_ns * `+smShare+`) / 3.6e12 AS active
  FROM `+rollupFinal+`
  GROUP BY t
) AS s ALL LEFT JOIN (
  SELECT toStartOfHour(minute) AS t, sum(billed_ns * fraction) / 3.6e12 AS allocated
  FROM `+billedMinutes+`
  GROUP BY t
) AS m USING t
ORDER BY t`).Description("sampled: GPU-minutes with a sample, in GPU-hours (slicemeter fleet's capacity also counts a GPU " +
			"for the presence period after each sample); allocated: billed seconds × billed fraction of the stored minutes, " +
			"and active: busy SMs in whole-GPU units, as slicemeter fleet defines them.")).
		WithPanel(chSeries("Memory efficiency by model (used / instance memory)", "percentunit",
			`SELECT time, model, sum(if(samples > 0 AND mem_total_bytes > 0, mem_used_bytes_sum / samples / mem_total_bytes, 0) * covered_ns) / sum(covered_ns) AS memory_efficiency
FROM `+rollupFinal+`
GROUP BY time, model HAVING sum(covered_ns) > 0 ORDER BY time`)).
		WithPanel(promSeries("Memory efficiency by model (trailing window)", "percentunit",
			promQuery{`max by (model) (slicemeter_fleet_memory_efficiency_ratio)`, "{{model}}"})).
		WithRow(dashboard.NewRowBuilder("Money")).
		WithPanel(promSeries("Margin by model (trailing window)", "currencyUSD",
			promQuery{`sum by (model) (slicemeter_fleet_margin)`, "{{model}}"})).
		WithPanel(promSeries("Revenue by model (trailing window)", "currencyUSD",
			promQuery{`sum by (model) (slicemeter_fleet_revenue)`, "{{model}}"})).
		WithPanel(promSeries("Overhead ratio by model against the 3 % target", "percentunit",
			promQuery{`max by (model) (slicemeter_fleet_overhead_ratio)`, "{{model}}"},
			promQuery{`vector(0.03)`, "target"})).
		WithPanel(chSeries("Revenue and list revenue per hour", "currencyUSD",
			`SELECT toStartOfHour(minute) AS time, sumIf(cost, tenant != '__unallocated__') AS revenue,
  sumIf(list_cost, tenant != '__unallocated__') AS list_revenue
FROM `+minutes+`
GROUP BY time ORDER BY time`)).
		WithRow(dashboard.NewRowBuilder("Risk and waste")).
		WithPanel(promSeries("Tenants per host against the limit", "short",
			promQuery{`max by (node) (slicemeter_fleet_tenants_per_host)`, "{{node}}"},
			promQuery{`max(slicemeter_fleet_tenants_per_host_limit)`, "limit"})).
		WithPanel(promSeries("Stranded MIG slices by model", "short",
			promQuery{`max by (model) (slicemeter_fleet_fragmented_slices)`, "{{model}}"})).
		WithPanel(chTable("Most tenants on one host in a minute", `SELECT node, max(n) AS most_tenants
FROM (SELECT node, minute, uniqExact(tenant) AS n FROM `+minutes+`
  WHERE tenant != '__unallocated__' AND billed_ns > 0 GROUP BY node, minute)
GROUP BY node ORDER BY most_tenants DESC`)).
		WithRow(dashboard.NewRowBuilder("Energy")).
		WithPanel(chSeries("GPU energy per hour by model (kWh)", "kwatth",
			`SELECT toStartOfHour(time) AS t, model, sum(j) / 3.6e6 AS energy_kwh
FROM (SELECT time, node, gpu_uuid, any(model) AS model, max(energy_j_sum) AS j
  FROM `+rollupFinal+` GROUP BY time, node, gpu_uuid)
GROUP BY t, model ORDER BY t`)).
		// Energy is the GPU's energy counter's increase; where it could not be read (the GPU
		// does not support it, NVML failed, a tick after a gap) it is power × time: how much of
		// the energy is estimated says how far to trust the kWh above.
		WithPanel(chSeries("Energy estimated from power (share of samples) by model", "percentunit",
			`SELECT toStartOfHour(time) AS t, model, sum(energy_estimated_samples) / greatest(sum(samples), 1) AS estimated
FROM `+rollupFinal+`
GROUP BY t, model ORDER BY t`)).
		WithPanel(promSeries("GPU energy by model (trailing window, kWh)", "kwatth",
			promQuery{`sum by (model) (slicemeter_fleet_energy_kwh)`, "{{model}}"})).
		// Right-sizing (slicemeter advise, the last 7 days): what moving each allocation to the
		// smallest shape that holds it would free and save.
		WithPanel(promSeries("Right-sizing: GPU-equivalents freed by model", "short",
			promQuery{`sum by (model) (slicemeter_advice_gpu_equivalents_freed)`, "{{model}}"})).
		WithPanel(promSeries("Right-sizing: savings over 30 days by tenant", "currencyUSD",
			promQuery{`sum by (tenant) (slicemeter_advice_savings_30d)`, "{{tenant}}"}))
}
