package dashboards

//lint:file-ignore SA1019 the v1 dashboard schema imports into Grafana 11 and 12; dashboardv2 only into 12.

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Generated is one generated dashboard.
type Generated struct {
	File      string // under dashboards/json
	Dashboard dashboard.Dashboard
}

// All builds every dashboard.
func All() ([]Generated, error) {
	builders := []struct {
		file string
		b    *dashboard.DashboardBuilder
	}{
		{"fleet.json", fleet()},
		{"tenant.json", tenant()},
		{"sla.json", sla()},
		{"instance.json", instance()},
		{"pipeline.json", pipeline()},
		{"gpu-health.json", gpuHealth()},
		{"economics.json", economics()},
	}
	out := make([]Generated, 0, len(builders))
	for _, b := range builders {
		d, err := b.b.Build()
		if err != nil {
			return nil, fmt.Errorf("building dashboard %s: %w", b.file, err)
		}
		out = append(out, Generated{File: b.file, Dashboard: d})
	}
	return out, nil
}

// rollup1m reads the collector's per-minute rollup, taking per (node, instance, minute) the row
// with the most samples (a minute recomputed after late samples has several; the fullest wins).
// The SM activity columns keep their names, for tables.SMActivity.
var rollup1m = `(SELECT time, node, instance_id, any(gpu_uuid) AS gpu_uuid, any(model) AS model, any(kind) AS kind,
    max(samples) AS n, ` + tables.Fullest("attached_sum") + ` AS attached,
    ` + tables.Fullest("sm_active_sum") + ` AS sm_active_sum, ` + tables.Fullest("active_samples") + ` AS active_samples
  FROM samples_1m WHERE $__timeFilter(time) GROUP BY ` + tables.RollupKey + `)`

// minutesWindow selects the minutes of the dashboard's time range.
const minutesWindow = "$__timeFilter(minute)"

// minutes reads the attribution service's stored minutes: per minute only the rows of its
// latest computation (tables.LatestPass).
var minutes = `(SELECT * FROM attribution_minutes
  WHERE ` + tables.LatestPass(minutesWindow) + `)`

func fleet() *dashboard.DashboardBuilder {
	return newDashboard("slicemeter-fleet", "slicemeter / Fleet",
		"Capacity, allocation, utilization and what it cost: the operator's and finance's view.", prometheusAndClickHouse, "fleet").
		WithRow(dashboard.NewRowBuilder("Capacity")).
		WithPanel(chStat("GPUs reporting", "short",
			`SELECT uniqExact(node, gpu_uuid) AS gpus FROM samples_1m WHERE $__timeFilter(time)`)).
		WithPanel(chStat("Instances (GPU, MIG, vGPU)", "short",
			`SELECT uniqExact(node, instance_id) AS instances FROM samples_1m WHERE $__timeFilter(time)`)).
		WithPanel(promStat("Unallocated list cost (trailing window)", "currencyUSD",
			promQuery{`sum(slicemeter_unallocated_list_cost)`, "unallocated"})).
		WithPanel(promStat("Tenants billed (trailing window)", "short",
			promQuery{`count(slicemeter_tenant_cost)`, "tenants"})).
		WithPanel(chSeries("Allocated share of instances", "percentunit",
			`SELECT time, kind, sum(attached) / sum(n) AS allocated
FROM `+rollup1m+`
GROUP BY time, kind ORDER BY time`)).
		WithPanel(chSeries("SM activity by GPU model", "percentunit",
			`SELECT time, model, `+tables.SMActivity+` AS sm_active
FROM `+rollup1m+`
GROUP BY time, model ORDER BY time`)).
		WithRow(dashboard.NewRowBuilder("Cost")).
		WithPanel(chSeries("Cost, waste, overhead and unallocated per hour", "currencyUSD",
			`SELECT toStartOfHour(minute) AS time,
  sumIf(cost, tenant != '__unallocated__') AS cost,
  sumIf(waste_cost, tenant != '__unallocated__') AS waste,
  sumIf(overhead_cost, tenant != '__unallocated__') AS overhead,
  sumIf(list_cost, tenant = '__unallocated__') AS unallocated
FROM `+minutes+`
GROUP BY time ORDER BY time`)).
		WithPanel(chTable("Top wasting tenants", `SELECT tenant, any(tier) AS tier, sum(waste_cost) AS waste, sum(cost) AS cost,
  `+tables.Efficiency+` AS efficiency
FROM `+minutes+`
WHERE tenant != '__unallocated__'
GROUP BY tenant ORDER BY waste DESC LIMIT 10`)).
		WithPanel(promSeries("Cost, waste, overhead and unallocated (trailing window)", "currencyUSD",
			promQuery{`sum(slicemeter_tenant_cost)`, "cost"},
			promQuery{`sum(slicemeter_tenant_waste_cost)`, "waste"},
			promQuery{`sum(slicemeter_tenant_overhead_cost)`, "overhead"},
			promQuery{`sum(slicemeter_unallocated_list_cost)`, "unallocated"})).
		WithPanel(promSeries("Cost per hour by tenant (rate of the cost counters)", "currencyUSD",
			promQuery{`sum by (tenant) (rate(slicemeter_tenant_cost_total[15m])) * 3600`, "{{tenant}}"}))
}

func tenant() *dashboard.DashboardBuilder {
	sel := `tenant=~"$tenant"`
	return newDashboard("slicemeter-tenant", "slicemeter / Tenant",
		"One tenant's cost, waste, overhead, efficiency, jitter, cold starts and instances.", prometheusAndClickHouse, "tenant").
		WithVariable(clickhouseVariable("tenant", "Tenant", `SELECT DISTINCT tenant FROM allocations ORDER BY tenant`)).
		WithRow(dashboard.NewRowBuilder("Cost")).
		WithPanel(promStat("Cost (trailing window)", "currencyUSD", promQuery{`sum(slicemeter_tenant_cost{` + sel + `})`, "cost"})).
		WithPanel(promStat("Waste (trailing window)", "currencyUSD", promQuery{`sum(slicemeter_tenant_waste_cost{` + sel + `})`, "waste"})).
		WithPanel(promStat("Overhead (trailing window)", "currencyUSD", promQuery{`sum(slicemeter_tenant_overhead_cost{` + sel + `})`, "overhead"})).
		WithPanel(promStat("Efficiency", "percentunit", promQuery{`avg(slicemeter_tenant_efficiency_ratio{` + sel + `})`, "efficiency"})).
		WithRow(dashboard.NewRowBuilder("Service")).
		WithPanel(promSeries("Scheduling jitter p99", "s", promQuery{`max by (tenant) (slicemeter_tenant_jitter_p99_seconds{` + sel + `})`, "{{tenant}}"})).
		WithPanel(promSeries("Cold start (longest in the window)", "s", promQuery{`max by (tenant) (slicemeter_tenant_cold_start_max_seconds{` + sel + `})`, "{{tenant}}"})).
		WithRow(dashboard.NewRowBuilder("Instances")).
		WithPanel(chTable("Allocations", `SELECT allocation_id, cur_tier AS tier, cur_node AS node, cur_instance_id AS instance,
  toDateTime(intDiv(cur_requested_ns, 1000000000)) AS requested, toDateTime(intDiv(cur_started_ns, 1000000000)) AS started,
  if(cur_ended_ns = 0, 'running', toString(toDateTime(intDiv(cur_ended_ns, 1000000000)))) AS ended
FROM (`+tables.LatestAllocations("tenant IN ($tenant)")+`)
WHERE cur_deleted = 0 ORDER BY requested`)).
		WithPanel(chSeries("SM activity of its instances", "percentunit", `SELECT time, concat(node, '/', instance_id) AS instance, `+tables.SMActivity+` AS sm_active
FROM `+rollup1m+`
WHERE attached > 0 AND (node, instance_id) IN (SELECT node, instance_id FROM allocations WHERE tenant IN ($tenant))
GROUP BY time, node, instance_id ORDER BY time`)).
		WithPanel(chSeries("Cost, waste and overhead per hour", "currencyUSD", `SELECT toStartOfHour(minute) AS time, sum(cost) AS cost, sum(waste_cost) AS waste, sum(overhead_cost) AS overhead
FROM `+minutes+`
WHERE tenant IN ($tenant)
GROUP BY time ORDER BY time`))
}

func sla() *dashboard.DashboardBuilder {
	return newDashboard("slicemeter-sla", "slicemeter / SLA",
		"Scheduling jitter and cold start by tier against their limits, breaches, noisy neighbours.", prometheusAndClickHouse, "sla").
		WithRow(dashboard.NewRowBuilder("Jitter")).
		WithPanel(promSeries("Jitter p99 by tenant", "s", promQuery{`max by (tenant, tier) (slicemeter_tenant_jitter_p99_seconds)`, "{{tenant}} ({{tier}})"})).
		WithPanel(promSeries("Worst jitter p99 by tier against its limit", "s",
			promQuery{`max by (tier) (slicemeter_tenant_jitter_p99_seconds)`, "{{tier}}"},
			promQuery{`max by (tier) (slicemeter_sla_jitter_p99_limit_seconds)`, "{{tier}} limit"})).
		WithRow(dashboard.NewRowBuilder("Cold start")).
		WithPanel(promSeries("Cold start p95 by tier against its limit", "s",
			promQuery{`histogram_quantile(0.95, sum by (tier, le) (rate(slicemeter_cold_start_seconds_bucket[1h])))`, "{{tier}} p95"},
			promQuery{`max by (tier) (slicemeter_sla_cold_start_limit_seconds)`, "{{tier}} limit"})).
		WithPanel(promSeries("Longest cold start by tier (trailing window)", "s", promQuery{`max by (tier) (slicemeter_tenant_cold_start_max_seconds)`, "{{tier}}"})).
		WithPanel(promTable("SLA breaches by tenant",
			promQuery{`sum by (tenant, tier) (slicemeter_cold_start_breaches_total)`, "cold start {{tenant}}"},
			promQuery{`sum by (tenant, tier) (slicemeter_jitter_breaches_total) or vector(0)`, "jitter {{tenant}}"})).
		WithRow(dashboard.NewRowBuilder("Noisy neighbours")).
		WithPanel(chTable("vGPU share of each time-sliced GPU", `SELECT node, gpu_uuid, instance_id, avg(sm_active) AS gpu_time_share,
  sum(length(vgpu_waits_ns)) AS waits, max(arrayReduce('max', vgpu_waits_ns)) / 1e6 AS longest_wait_ms
FROM samples WHERE kind = 'vgpu' AND $__timeFilter(time)
GROUP BY node, gpu_uuid, instance_id ORDER BY node, gpu_uuid, gpu_time_share DESC`))
}

func instance() *dashboard.DashboardBuilder {
	where := `node = '${node}' AND gpu_uuid = '${gpu}' AND instance_id = '${instance}' AND $__timeFilter(time)`
	raw := func(cols string) string {
		return `SELECT intDiv(ts_ns, 1000000) AS time_ms, ` + cols + `
FROM samples WHERE ` + where + `
ORDER BY time_ms`
	}
	return newDashboard("slicemeter-instance", "slicemeter / Instance drill-down",
		"Every sample of one instance at the exporter's sampling rate.", clickHouseOnly, "instance").
		WithVariable(clickhouseVariable("node", "Node", `SELECT DISTINCT node FROM samples WHERE $__timeFilter(time) ORDER BY node`)).
		WithVariable(clickhouseVariable("gpu", "GPU", `SELECT DISTINCT gpu_uuid FROM samples WHERE node = '${node}' AND $__timeFilter(time) ORDER BY gpu_uuid`)).
		WithVariable(clickhouseVariable("instance", "Instance", `SELECT DISTINCT instance_id FROM samples WHERE node = '${node}' AND gpu_uuid = '${gpu}' AND $__timeFilter(time) ORDER BY instance_id`)).
		WithPanel(subSecond(chSeries("SM activity", "percentunit", raw(`sm_active, attached`))).Span(24)).
		WithPanel(subSecond(chSeries("Memory", "bytes", raw(`mem_used_bytes AS used, mem_total_bytes AS total`)))).
		WithPanel(subSecond(chSeries("GPU power", "watt", raw(`power_watts AS power`)))).
		WithPanel(subSecond(chSeries("vGPU scheduling per tick", "s", raw(`vgpu_run_ns / 1e9 AS run, vgpu_switch_ns / 1e9 AS switching,
  arrayReduce('max', vgpu_waits_ns) / 1e9 AS longest_wait`))))
}

func pipeline() *dashboard.DashboardBuilder {
	return newDashboard("slicemeter-pipeline", "slicemeter / Pipeline health",
		"Exporter sampling, Kafka delivery, collector freshness and attribution lag.", prometheusOnly, "pipeline").
		WithRow(dashboard.NewRowBuilder("Exporter")).
		WithPanel(promSeries("Samples taken per second", "short", promQuery{`sum by (instance) (rate(slicemeter_exporter_samples_total[5m]))`, "{{instance}}"})).
		WithPanel(promSeries("Sampling jitter p99 (actual minus intended tick)", "s",
			promQuery{`histogram_quantile(0.99, sum by (instance, le) (rate(slicemeter_exporter_sampling_jitter_seconds_bucket[5m])))`, "{{instance}}"})).
		WithPanel(promSeries("Source errors and publish errors", "short",
			promQuery{`sum by (instance) (rate(slicemeter_exporter_source_errors_total[5m]))`, "source {{instance}}"},
			promQuery{`sum by (instance) (rate(slicemeter_exporter_publish_errors_total[5m]))`, "publish {{instance}}"})).
		WithPanel(promSeries("NVML errors by call", "short", promQuery{`sum by (instance, call) (rate(slicemeter_exporter_nvml_errors_total[5m])) or vector(0)`, "{{instance}} {{call}}"})).
		WithPanel(promSeries("Disk spool (Kafka unreachable)", "bytes", promQuery{`sum by (instance) (slicemeter_exporter_spool_bytes) or vector(0)`, "{{instance}}"})).
		WithPanel(promSeries("Samples dropped", "short", promQuery{`sum by (instance, reason) (rate(slicemeter_exporter_samples_dropped_total[5m])) or vector(0)`, "{{instance}} {{reason}}"})).
		WithRow(dashboard.NewRowBuilder("Collector")).
		WithPanel(promSeries("Samples stored per second", "short", promQuery{`sum by (instance) (rate(slicemeter_collector_samples_stored_total[5m]))`, "{{instance}}"})).
		WithPanel(promSeries("Freshness p99 (sample taken → stored)", "s",
			promQuery{`histogram_quantile(0.99, sum by (le) (rate(slicemeter_collector_sample_freshness_seconds_bucket[5m])))`, "p99"})).
		WithPanel(promSeries("Consumer lag by topic", "short", promQuery{`sum by (topic) (slicemeter_collector_consumer_lag_messages)`, "{{topic}}"})).
		WithPanel(promSeries("Dead-lettered messages", "short", promQuery{`sum by (topic, reason) (rate(slicemeter_collector_deadlettered_total[5m])) or vector(0)`, "{{topic}} {{reason}}"})).
		WithRow(dashboard.NewRowBuilder("Attribution")).
		WithPanel(promSeries("Attribution lag (now minus the end of the latest window attributed)", "s",
			promQuery{`max(slicemeter_attribution_lag_seconds)`, "lag"})).
		WithPanel(promSeries("Attribution run time p99", "s",
			promQuery{`histogram_quantile(0.99, sum by (le) (rate(slicemeter_attribution_duration_seconds_bucket[15m])))`, "p99"}))
}

// Marshal renders a dashboard as the JSON Grafana imports.
func Marshal(d dashboard.Dashboard) ([]byte, error) {
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding dashboard %s: %w", *d.Uid, err)
	}
	return append(data, '\n'), nil
}
