package e2e

import (
	"context"
	"encoding/csv"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestAttributionService: the demo fills ClickHouse with a scenario; then the binary's
// attribution commands work on it as an operator would use them: report --step, allocations
// import (CSV, refusals with exit status 2), pricebook check against the fleet, and the
// attribution service's HTTP API and /metrics.
func TestAttributionService(t *testing.T) {
	t.Parallel()
	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "mig-basic.yaml")
	sc := loadScenario(t, file)
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--report", filepath.Join(t.TempDir(), "r.csv"),
		"--clickhouse.dsn", dsn, "--web.listen-address", "127.0.0.1:0")
	from, to := sc.Start.Format(time.RFC3339), sc.End().Format(time.RFC3339)
	dir := t.TempDir()

	t.Run("report --step", func(t *testing.T) {
		whole := apptest.Run(t, ctx, "report", "--clickhouse.dsn", dsn, "--scenario", file, "--from", from, "--to", to)
		stepped := apptest.Run(t, ctx, "report", "--clickhouse.dsn", dsn, "--scenario", file, "--from", from, "--to", to, "--step", "15m")
		if whole.Code != 0 || stepped.Code != 0 {
			t.Fatalf("report exited %d / %d\n%s%s", whole.Code, stepped.Code, whole.Stderr, stepped.Stderr)
		}
		// No attribution service ran over January: the stored minutes cannot make this report.
		if r := apptest.Run(t, ctx, "report", "--clickhouse.dsn", dsn, "--scenario", file, "--from", from, "--to", to, "--from-minutes"); r.Code != 1 ||
			!strings.Contains(r.Stderr, "60 of its 60 minutes are not attributed yet") {
			t.Errorf("report --from-minutes exited %d:\n%s", r.Code, r.Stderr)
		}
		w, s := sumColumn(t, whole.Stdout), sumColumn(t, stepped.Stdout)
		if len(s.windows) != 4 {
			t.Errorf("--step 15m gave windows %v, want 4", s.windows)
		}
		// Money is linear in time: the quarters add up to the hour (to the printed decimals).
		for tenant, cost := range w.cost {
			if math.Abs(s.cost[tenant]-cost) > 4e-6 {
				t.Errorf("%s: Σ quarter-hour costs %.6f, hour %.6f", tenant, s.cost[tenant], cost)
			}
		}
	})

	t.Run("allocations import", func(t *testing.T) {
		const header = "allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n"
		write := func(name, content string) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
		good := write("late.csv", header+"late-1,late,budget,node-a,gpu0/mig3,2026-01-05T00:05:00Z,2026-01-05T00:05:00Z,2026-01-05T00:50:00Z\n"+
			"ghost-1,ghost,pro,node-z,gpu0,2026-01-05T00:00:00Z,2026-01-05T00:00:00Z,\n")
		for i, want := range []string{"2 allocations stored, 0 unchanged, 1 on instances not seen yet", "0 allocations stored, 2 unchanged"} {
			r := apptest.Run(t, ctx, "allocations", "import", "--clickhouse.dsn", dsn, good)
			if r.Code != 0 || !strings.Contains(r.Stdout, want) {
				t.Fatalf("import %d exited %d: %s%s; want %q", i, r.Code, r.Stdout, r.Stderr, want)
			}
		}
		for name, tc := range map[string]struct{ content, want string }{
			"overlap.csv": {header + "o-1,other,pro,node-a,gpu0/mig0,2026-01-05T00:30:00Z,2026-01-05T00:30:00Z,2026-01-05T00:40:00Z\n", `overlap.csv: line 2: allocations refused: allocation "o-1" of tenant "other" [2026-01-05T00:30:00Z, 2026-01-05T00:40:00Z) overlaps allocation "mig-basic/acme/0" of tenant "acme"`},
			"bad.csv":     {header + "b-1,other,pro,node-a,gpu0/mig1,2026-01-05T00:30:00Z,later,\n", `bad.csv:2: started_at: "later"`},
			"bad.json":    {"[{\"allocation_id\": \"b\",\n \"colour\": 1}]", "bad.json:1: colour: unknown field"},
		} {
			r := apptest.Run(t, ctx, "allocations", "import", "--clickhouse.dsn", dsn, write(name, tc.content))
			if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("import %s exited %d, want 2 and %q:\n%s", name, r.Code, tc.want, r.Stderr)
			}
		}
		// The late allocation attributes the samples stored before it arrived.
		r := apptest.Run(t, ctx, "report", "--clickhouse.dsn", dsn, "--scenario", file, "--from", from, "--to", to)
		if r.Code != 0 || !strings.Contains(r.Stdout, "\nlate,budget,2026-01-05T00:00:00Z,2026-01-05T01:00:00Z,2700.000,") {
			t.Errorf("report after the late allocation exited %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})

	t.Run("pricebook check", func(t *testing.T) {
		book := filepath.Join(dir, "a100-only.yaml")
		if err := os.WriteFile(book, []byte("version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1, budget: 0.7}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := apptest.Run(t, ctx, "pricebook", "check", "--clickhouse.dsn", dsn, "--fleet.since", "87600h", book)
		if r.Code != 2 || !strings.Contains(r.Stderr, `"H100-SXM5-80GB"`) {
			t.Errorf("pricebook check of a book without the fleet's H100 exited %d:\n%s", r.Code, r.Stderr)
		}
		// The service starts with it all the same, attributing the H100 as unpriced
		// (TestUnpricedNeverStopsTheBill).
	})

	t.Run("service", func(t *testing.T) {
		svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", dsn, "--scenario", file, "--attribution.backfill", "5m")
		base := svc.URL("")

		get := func(path string) (int, string) {
			t.Helper()
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		post := func(body string) (int, string) {
			t.Helper()
			resp, err := http.Post(base+"/api/v1/allocations", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		alloc := `{"allocation_id": "api-1", "tenant": "delta", "tier": "pro", "node": "node-a", "instance_id": "gpu0/mig1",
			"requested_at": "2026-01-05T00:20:00Z", "started_at": "2026-01-05T00:20:30Z", "ended_at": "2026-01-05T00:30:00Z"}`
		if code, body := post(alloc); code != 200 || !strings.Contains(body, `"stored":["api-1"]`) {
			t.Errorf("POST: %d %s", code, body)
		}
		if code, body := post(alloc); code != 200 || !strings.Contains(body, `"unchanged":["api-1"]`) {
			t.Errorf("POST again (idempotent): %d %s", code, body)
		}
		if code, body := post(strings.Replace(alloc, "api-1", "api-2", 1)); code != 409 || !strings.Contains(body, `api-2`) || !strings.Contains(body, `api-1`) {
			t.Errorf("POST overlapping: %d %s", code, body)
		}
		if code, body := post("[\n{\"allocation_id\": 7}]"); code != 400 || !strings.Contains(body, "request:2: allocation_id") {
			t.Errorf("POST malformed: %d %s", code, body)
		}
		if code, body := get("/api/v1/allocations?tenant=delta"); code != 200 || !strings.Contains(body, `"allocation_id":"api-1"`) || strings.Contains(body, "acme") {
			t.Errorf("GET allocations: %d %s", code, body)
		}
		code, body := get("/api/v1/report?from=" + from + "&to=" + to + "&step=30m&format=json")
		if code != 200 || strings.Count(body, `"tenant": "__unallocated__"`) != 2 || !strings.Contains(body, `"tenant": "delta"`) {
			t.Errorf("GET report: %d %s", code, body)
		}
		// /metrics: the service has attributed its backfill; every family passes promtool.
		deadline := time.Now().Add(60 * time.Second)
		for {
			_, body = get("/metrics")
			if strings.Contains(body, `slicemeter_attribution_windows_stored_total{kind="fresh"}`) && !strings.Contains(body, `slicemeter_attribution_windows_stored_total{kind="fresh"} 0`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no minute attributed within 60 s:\n%s", body)
			}
			time.Sleep(500 * time.Millisecond)
		}
		for _, want := range []string{"slicemeter_attribution_lag_seconds ", `slicemeter_allocations_stored_total 1`, `slicemeter_allocations_refused_total{reason="conflict"} 1`,
			`slicemeter_sla_cold_start_limit_seconds{tier="budget"} 120`, `slicemeter_attribution_invariant_violations_total{invariant="capacity"} 0`,
			// The advice gauges, computed apart from the passes (adviseLoop).
			`slicemeter_advice_gpu_equivalents_freed{model="__fleet__"} `, `slicemeter_advice_errors_total 0`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		promtool, err := exec.LookPath("promtool")
		if err != nil {
			t.Fatal("promtool not found: run make deps")
		}
		check := exec.Command(promtool, "check", "metrics")
		check.Stdin = strings.NewReader(body)
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})
}

// sums are a report's cost per tenant and its windows.
type sums struct {
	cost    map[string]float64
	windows map[string]bool
}

func sumColumn(t *testing.T, text string) sums {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("report CSV: %v\n%s", err, text)
	}
	s := sums{cost: map[string]float64{}, windows: map[string]bool{}}
	for _, r := range rows[1:] {
		s.windows[r[2]] = true
		if r[0] == "__unallocated__" {
			continue
		}
		v, err := strconv.ParseFloat(r[6], 64)
		if err != nil {
			t.Fatalf("cost %q: %v", r[6], err)
		}
		s.cost[r[0]] += v
	}
	return s
}
