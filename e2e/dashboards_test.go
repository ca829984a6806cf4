package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/dashboards"
	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

const demoFleet = "../deploy/demo/fleet.yaml"

// expandMacros does what the Grafana ClickHouse plugin does with the macros and variables our
// dashboards use, for one time range and one choice of variables.
func expandMacros(sql string, from, to time.Time, vars map[string]string) string {
	ts := func(t time.Time) string { return fmt.Sprintf("toDateTime(%d)", t.Unix()) }
	r := strings.NewReplacer("$__fromTime", ts(from), "$__toTime", ts(to))
	sql = r.Replace(sql)
	for {
		i := strings.Index(sql, "$__timeFilter(")
		if i < 0 {
			break
		}
		j := strings.Index(sql[i:], ")")
		col := sql[i+len("$__timeFilter(") : i+j]
		sql = sql[:i] + fmt.Sprintf("%s >= %s AND %s <= %s", col, ts(from), col, ts(to)) + sql[i+j+1:]
	}
	for name, v := range vars {
		sql = strings.ReplaceAll(sql, "${"+name+"}", v)
		sql = strings.ReplaceAll(sql, "$"+name, "'"+v+"'") // multi-value form: IN ($tenant)
	}
	return sql
}

// Every ClickHouse panel and variable query runs against a real ClickHouse 18.16 filled by the
// demo fleet and returns rows; the same queries pass current ClickHouse's parser (chDB).
func TestDashboardClickHouseQueries(t *testing.T) {
	t.Parallel()
	db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	dsn := db.DSN
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The demo fleet's hour, ending a minute ago, so that the attribution service (whose window
	// is relative to now) stores its minutes for the Cost panels.
	start := time.Now().UTC().Truncate(time.Minute).Add(-61 * time.Minute)
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", demoFleet, "--fast", "--sim.start", start.Format(time.RFC3339),
		"--clickhouse.dsn", dsn, "--web.listen-address", "127.0.0.1:0", "--report", os.DevNull)
	sc := loadScenario(t, demoFleet)
	sc.Start = start
	conn := db.Conn
	attr := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", dsn, "--scenario", demoFleet,
		"--attribution.interval", "1s", "--attribution.delay", "0s", "--attribution.backfill", "2h", "--web.listen-address", "127.0.0.1:0")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var minutes uint64
		if err := conn.QueryRow(ctx, "SELECT uniqExact(minute) FROM attribution_minutes").Scan(&minutes); err != nil {
			t.Fatal(err)
		}
		if minutes >= 60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attribution stored %d of 60 minutes\n%s", minutes, attr.LogTail(20))
		}
		time.Sleep(time.Second)
	}
	_ = attr.Stop()
	var gpu string
	if err := conn.QueryRow(ctx, "SELECT any(gpu_uuid) FROM samples WHERE node = 'node-a' AND instance_id = 'gpu1/vgpu0'").Scan(&gpu); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"tenant": "acme", "node": "node-a", "gpu": gpu, "instance": "gpu1/vgpu0"}

	all, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	var expanded []string
	var slowest time.Duration
	for _, g := range all {
		for _, q := range dashboards.Queries(g.Dashboard) {
			if q.Kind != "clickhouse" {
				continue
			}
			sql := expandMacros(q.Text, sc.Start, sc.End(), vars)
			expanded = append(expanded, sql)
			began := time.Now()
			rows, err := conn.Query(ctx, sql)
			if err != nil {
				t.Errorf("%s / %s: %v\n%s", q.Dashboard, q.Panel, err, sql)
				continue
			}
			n := 0
			for rows.Next() {
				n++
			}
			err = rows.Err()
			rows.Close()
			took := time.Since(began)
			slowest = max(slowest, took)
			if err != nil || n == 0 {
				t.Errorf("%s / %s: %d rows, err %v\n%s", q.Dashboard, q.Panel, n, err, sql)
			}
			t.Logf("%-22s %-55s %6d rows %8v", q.Dashboard, q.Panel, n, took.Round(time.Microsecond))
		}
	}
	t.Logf("slowest ClickHouse panel query on one hour of the demo fleet (%d instances at 100 ms): %v", 10, slowest)

	// The current dialect: the tables, then every query, through chDB.
	localtest.CheckQueriesWithChDB(t, "dashboards.sql", expanded)
}

// Every PromQL panel query returns series from a real Prometheus that scraped a live demo
// (exporter and collector) and the attribution service during the test.
func TestDashboardPromQLQueries(t *testing.T) {
	t.Parallel()
	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Two minutes in the past: the attribution service (windows relative to now) finds closed
	// minutes to store within seconds, while the demo still samples in real time. Its tables
	// exist once it is ready: the attribution service needs them.
	start := time.Now().UTC().Truncate(time.Minute).Add(-2 * time.Minute)
	demo := apptest.StartDemo(t, ctx, "--scenario", demoFleet, "--sim.start", start.Format(time.RFC3339), "--clickhouse.dsn", dsn)
	attr := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", dsn, "--scenario", demoFleet,
		"--attribution.interval", "2s", "--attribution.delay", "0s")
	demoAddr, attrAddr := demo.Addr(), attr.Addr()

	prom, err := local.StartPrometheus(ctx, local.PrometheusOptions{Targets: map[string][]string{
		"slicemeter-demo": {demoAddr}, "slicemeter-attribution": {attrAddr},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Close()

	all, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	var queries []dashboards.Query
	for _, g := range all {
		for _, q := range dashboards.Queries(g.Dashboard) {
			if q.Kind == "prometheus" {
				queries = append(queries, q)
			}
		}
	}
	// vGPUs start running 15 s in; give the scrapes and the 2 s attribution runs time to see it.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var empty []string
		for _, q := range queries {
			expr := strings.ReplaceAll(q.Text, "$tenant", "acme|beta|gamma|delta")
			n, err := promSeries(ctx, prom.URL(), expr)
			if err != nil {
				t.Fatalf("%s / %s: %v\n%s", q.Dashboard, q.Panel, err, expr)
			}
			if n == 0 {
				empty = append(empty, q.Dashboard+" / "+q.Panel+": "+expr)
			}
		}
		if len(empty) == 0 {
			t.Logf("all %d PromQL panel queries return series", len(queries))
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(empty)
			t.Fatalf("queries without series:\n  %s\n--- demo log tail:\n%s\n--- attribution log tail:\n%s",
				strings.Join(empty, "\n  "), demo.LogTail(20), attr.LogTail(20))
		}
		time.Sleep(2 * time.Second)
	}
}

func promSeries(ctx context.Context, base, expr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("prometheus: %s", body.Error)
	}
	return len(body.Data.Result), nil
}
