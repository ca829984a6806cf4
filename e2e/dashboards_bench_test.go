package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/dashboards"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// BenchmarkDashboardQueriesDay times every ClickHouse panel query over one day of the demo
// fleet (10 instances at 100 ms: 8.6M samples) on ClickHouse 18.16. Target: each ≤ 1 s.
//
//	go test -run '^$' -bench DashboardQueriesDay -benchtime 3x ./e2e/
func BenchmarkDashboardQueriesDay(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	db := localtest.Database(b, localtest.DatabaseOptions{Name: "bench_day", Unmigrated: true})
	fleet, err := os.ReadFile(demoFleet)
	if err != nil {
		b.Fatal(err)
	}
	day := filepath.Join(b.TempDir(), "day.yaml")
	if err := os.WriteFile(day, []byte(strings.Replace(strings.ReplaceAll(string(fleet), "end: 1h", "end: 24h"), "duration: 1h", "duration: 24h", 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	sc, err := scenario.Load(day)
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	apptest.Demo(b, ctx, "--no-attribution.store-minutes", "--scenario", day, "--fast", "--clickhouse.dsn", db.DSN, "--web.listen-address", "127.0.0.1:0", "--report", os.DevNull)
	b.Logf("a day of the demo fleet through the pipeline: %v", time.Since(began).Round(time.Millisecond))
	conn := db.Conn
	var gpu string
	if err := conn.QueryRow(ctx, "SELECT any(gpu_uuid) FROM samples WHERE node = 'node-a' AND instance_id = 'gpu1/vgpu0'").Scan(&gpu); err != nil {
		b.Fatal(err)
	}
	vars := map[string]string{"tenant": "acme", "node": "node-a", "gpu": gpu, "instance": "gpu1/vgpu0"}
	all, err := dashboards.All()
	if err != nil {
		b.Fatal(err)
	}
	for _, g := range all {
		for _, q := range dashboards.Queries(g.Dashboard) {
			if q.Kind != "clickhouse" {
				continue
			}
			sql := expandMacros(q.Text, sc.Start, sc.End(), vars)
			b.Run(strings.TrimPrefix(q.Dashboard, "slicemeter-")+"/"+strings.ReplaceAll(q.Panel, " ", "_"), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					rows, err := conn.Query(ctx, sql)
					if err != nil {
						b.Fatal(err)
					}
					for rows.Next() {
					}
					rows.Close()
				}
			})
		}
	}
}
