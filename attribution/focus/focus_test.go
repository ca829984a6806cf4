package focus_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/focus/focustest"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

func TestHours(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		from, to string
		zone     *time.Location
		want     []string // the windows' starts, then the last end
	}{
		{"whole hours", "2026-01-05T00:00:00Z", "2026-01-05T02:00:00Z", time.UTC, []string{"2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z", "2026-01-05T02:00:00Z"}},
		{"from inside an hour", "2026-01-05T00:20:00Z", "2026-01-05T01:10:00Z", time.UTC, []string{"2026-01-05T00:20:00Z", "2026-01-05T01:00:00Z", "2026-01-05T01:10:00Z"}},
		// Asia/Kolkata's February starts at 18:30 UTC: the hour is cut there.
		{"a month starting inside an hour", "2026-01-31T18:00:00Z", "2026-01-31T19:00:00Z", kolkata, []string{"2026-01-31T18:00:00Z", "2026-01-31T18:30:00Z", "2026-01-31T19:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			ws := focus.Hours(at(tc.from), at(tc.to), tc.zone)
			for _, w := range ws {
				got = append(got, w.Start.Format(time.RFC3339))
			}
			got = append(got, ws[len(ws)-1].End.Format(time.RFC3339))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMetadataColumns: for each FOCUS version, the metadata, the Parquet schema and the CSV
// header the writer writes list the same columns in the same order, the FOCUS columns before
// the x_ ones; 1.3 has its columns and 1.2 none of them.
func TestMetadataColumns(t *testing.T) {
	only13 := []string{"AllocatedMethodDetails", "AllocatedMethodId", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",
		"HostProviderName", "ServiceProviderName"}
	for _, tc := range []struct {
		v          focus.Version
		tagColumns []string // the columns with ProviderTagPrefixes
	}{
		{focus.Focus12, []string{"Tags"}},
		{focus.Focus13, []string{"AllocatedTags", "Tags"}},
	} {
		t.Run(string(tc.v), func(t *testing.T) {
			m := tc.v.Metadata("slicemeter test", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), nil)
			var names []string
			for _, c := range m.Schema.ColumnDefinition {
				names = append(names, c.ColumnName)
			}
			cols := tc.v.Columns()
			if !slices.Equal(names, cols) {
				t.Errorf("metadata columns %v\nCSV header %v", names, cols)
			}
			var b bytes.Buffer
			w, err := tc.v.NewWriter(&b, focus.CSV)
			if err != nil || w.Close() != nil {
				t.Fatal(err)
			}
			if header := strings.TrimSuffix(b.String(), "\n"); header != strings.Join(cols, ",") {
				t.Errorf("CSV header %s\ncolumns %v", header, cols)
			}
			var pq []string
			for _, f := range tc.v.ParquetSchema().Fields() {
				pq = append(pq, f.Name())
			}
			if !slices.Equal(pq, cols) {
				t.Errorf("Parquet columns %v\nCSV header %v", pq, cols)
			}
			custom := false
			for _, c := range cols {
				if strings.HasPrefix(c, "x_") {
					custom = true
				} else if custom {
					t.Errorf("FOCUS column %s after an x_ column", c)
				}
			}
			for _, c := range only13 {
				if got, want := slices.Contains(cols, c), tc.v == focus.Focus13; got != want {
					t.Errorf("column %s present %v, want %v", c, got, want)
				}
			}
			if m.Schema.FocusVersion != string(tc.v) || m.Schema.CreationDate != "2026-02-01T00:00:00Z" {
				t.Errorf("metadata %+v", m.Schema)
			}
			// FOCUS 1.2 (Metadata, Column Definition): the Tags column MUST name the prefixes of
			// the provider's own tag keys; 1.3's AllocatedTags holds tags too.
			for _, c := range m.Schema.ColumnDefinition {
				want := []string(nil)
				if slices.Contains(tc.tagColumns, c.ColumnName) {
					want = []string{focus.TagPrefix}
				}
				if !slices.Equal(c.ProviderTagPrefixes, want) {
					t.Errorf("column %s: ProviderTagPrefixes %q, want %q", c.ColumnName, c.ProviderTagPrefixes, want)
				}
			}
		})
	}
}

// sums are Σ of a column per BillingAccountId.
func sums(t *testing.T, rows [][]string, column string) map[string]float64 {
	t.Helper()
	i := slices.Index(rows[0], column)
	out := map[string]float64{}
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[i], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[r[slices.Index(rows[0], "BillingAccountId")]] += v
	}
	return out
}

// TestScenarios exports every public scenario as FOCUS, CSV and Parquet, from the raw samples
// and from the minutes the attribution service would store, and checks: Σ BilledCost and
// Σ ListCost per tenant equal the tenant report's cost and list_cost (1e-6), the 1.2 rules
// (focustest.Check12), the Parquet file holds the CSV's rows, and the FOCUS validator passes
// both files.
func TestScenarios(t *testing.T) {
	localtest.SkipShort(t, "ClickHouse")
	dir := filepath.Join("..", "..", "schemas", "scenario", "testdata")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("public scenarios: %v, %v", files, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			sc, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			conn := chtest.NewDatabase(t, nil)
			chtest.InsertScenario(t, conn, sc)
			book := sc.Book
			o := attribution.Options{Samples: store.RawSamples}
			res, err := attribution.Report(ctx, conn, book, attribution.Options{From: sc.Start, To: sc.End(), Samples: store.RawSamples})
			if err != nil {
				t.Fatal(err)
			}
			e := focus.Export{Report: focus.FromAttribution(conn, book, o, nil), Zone: book.Zone(), Issuer: focus.DefaultIssuer}
			// FOCUS 1.2, as selected: its rules, the money's digits and the validator.
			rows12, parquet12, files12 := export(t, e, sc.Start, sc.End(), focus.Focus12)
			focustest.Check12(t, rows12)
			focustest.CheckMoneyDigits(t, rows12, focus.MoneyScale, moneyColumns...)
			if !slices.EqualFunc(rows12, parquet12, slices.Equal) {
				t.Errorf("FOCUS 1.2: the Parquet file's %d rows differ from the CSV's %d", len(parquet12), len(rows12))
			}
			// FOCUS 1.3, the default: the same rows with its columns added.
			rows, parquetRows, files := export(t, e, sc.Start, sc.End(), focus.DefaultVersion)
			if len(rows) < 2 {
				t.Fatalf("no FOCUS rows")
			}
			focustest.Check13(t, rows)
			focustest.CheckMoneyDigits(t, rows, focus.MoneyScale, moneyColumns...)
			if len(rows) != len(rows12) {
				t.Errorf("FOCUS 1.3 has %d rows, 1.2 %d", len(rows), len(rows12))
			}
			billed, list := sums(t, rows, "BilledCost"), sums(t, rows, "ListCost")
			energy, anyEnergy := sums(t, rows, "x_EnergyJoules"), 0.
			for _, r := range res.Report.Tenants {
				if want := *r.EnergyKWh * 3.6e6; math.Abs(energy[r.Tenant]-want) > 1e-6*math.Max(1, want) {
					t.Errorf("tenant %q: Σ x_EnergyJoules %.6f, its report's energy %.6f J", r.Tenant, energy[r.Tenant], want)
				}
				anyEnergy += energy[r.Tenant]
				if math.Abs(billed[r.Tenant]-r.Cost) > 1e-6 || math.Abs(list[r.Tenant]-r.ListCost) > 1e-6 {
					t.Errorf("tenant %q: Σ BilledCost %.9f, Σ ListCost %.9f; its report: cost %.9f, list_cost %.9f", r.Tenant, billed[r.Tenant], list[r.Tenant], r.Cost, r.ListCost)
				}
				delete(billed, r.Tenant)
			}
			if len(billed) > 0 {
				t.Errorf("FOCUS rows of tenants without a report row: %v", billed)
			}
			if anyEnergy <= 0 {
				t.Errorf("no tenant has energy: %v", energy)
			}
			if !slices.EqualFunc(rows, parquetRows, slices.Equal) {
				t.Errorf("the Parquet file's %d rows differ from the CSV's %d", len(parquetRows), len(rows))
			}
			// A tenant's scope: only its rows.
			tenant := res.Report.Tenants[0].Tenant
			e.Tenants = []string{tenant}
			var b bytes.Buffer
			w, _ := focus.NewWriter(&b, focus.CSV)
			tot, err := e.Usage(ctx, sc.Start, sc.End(), w)
			if err != nil || w.Close() != nil {
				t.Fatal(err)
			}
			if len(tot.BilledCost) != 1 || math.Abs(tot.BilledCost[tenant]-res.Report.Tenants[0].Cost) > 1e-6 {
				t.Errorf("tenant %q's own export: %v", tenant, tot.BilledCost)
			}
			dir := t.TempDir()
			if d := os.Getenv("SLICEMETER_FOCUS_KEEP"); d != "" {
				dir = d
			}
			// focus-validator 1.0 checks the FOCUS 1.0 rules: it runs on both versions' files
			// (a 1.3 file's added columns are unknown to it and pass).
			for v, fs := range map[focus.Version]map[focus.Format][]byte{focus.Focus12: files12, focus.Focus13: files} {
				for f, data := range fs {
					out := filepath.Join(dir, name+".focus-"+string(v)+"."+string(f))
					if err := os.WriteFile(out, data, 0o600); err != nil {
						t.Fatal(err)
					}
					localtest.ValidateFOCUS(t, out)
				}
			}
		})
	}
}

// export writes the range as CSV and as Parquet of the version and reads both back as rows
// of cells.
func export(t *testing.T, e focus.Export, from, to time.Time, v focus.Version) (csvRows, parquetRows [][]string, files map[focus.Format][]byte) {
	t.Helper()
	ctx := context.Background()
	var c, p bytes.Buffer
	for _, out := range []struct {
		f focus.Format
		w io.Writer
	}{{focus.CSV, &c}, {focus.Parquet, &p}} {
		w, err := v.NewWriter(out.w, out.f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Usage(ctx, from, to, w); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	files = map[focus.Format][]byte{focus.CSV: slices.Clone(c.Bytes()), focus.Parquet: p.Bytes()}
	csvRows, err := csv.NewReader(&c).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := focus.ReadParquet(bytes.NewReader(p.Bytes()), int64(p.Len()))
	if err != nil {
		t.Fatal(err)
	}
	parquetRows = [][]string{v.Columns()}
	for _, r := range rows {
		parquetRows = append(parquetRows, v.Cells(r))
	}
	return csvRows, parquetRows, files
}

// TestValidatorRefuses: the validator, as the tests run it, fails a file that breaks a FOCUS
// rule (a ChargeFrequency outside the spec's values), CSV or Parquet, so that its passes mean
// something.
func TestValidatorRefuses(t *testing.T) {
	localtest.SkipShort(t, "the FOCUS validator (python)")
	if _, err := local.FocusValidator(); err != nil {
		t.Skip(err)
	}
	p := focus.PeriodOf(time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC), time.UTC)
	cold := time.Second
	r := focus.Usage(report.AllocationRow{Tenant: "acme", AllocationID: "a1", Tier: "pro", Node: "n", Instance: "gpu0", Kind: "gpu",
		Model: "A100-SXM4-40GB", Fraction: 1, Allocated: time.Hour, ListCost: 1.6, Cost: 1.6, Currency: "USD",
		WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour), ColdStart: &cold}, p, focus.DefaultIssuer)
	for _, tc := range []struct {
		name  string
		spoil func(*focus.Row)
		fails bool
	}{
		{"as written", func(*focus.Row) {}, false},
		{"ChargeFrequency Hourly", func(r *focus.Row) { r.ChargeFrequency = "Hourly" }, true},
		{"no BillingCurrency", func(r *focus.Row) { r.BillingCurrency = "" }, true},
	} {
		for _, f := range []focus.Format{focus.CSV, focus.Parquet} {
			t.Run(tc.name+"/"+string(f), func(t *testing.T) {
				row := r
				tc.spoil(&row)
				var b bytes.Buffer
				w, _ := focus.NewWriter(&b, f)
				if err := w.Write(row); err != nil || w.Close() != nil {
					t.Fatal(err)
				}
				file := filepath.Join(t.TempDir(), "f."+string(f))
				if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
					t.Fatal(err)
				}
				err := local.ValidateFOCUS(context.Background(), file)
				if (err != nil) != tc.fails {
					t.Errorf("validator: %v, want failure %v", err, tc.fails)
				}
			})
		}
	}
}

// TestCountHours: CountHours and FirstHourEnd are Hours' length and first end, in zones whose
// months start on and off the UTC hour; the widest ranges are counted at once.
func TestCountHours(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	edges := []string{"2026-01-31T18:00:00Z", "2026-01-31T18:29:59.5Z", "2026-01-31T18:30:00Z", "2026-01-31T19:00:00Z",
		"2026-02-01T00:00:00Z", "2026-03-31T22:15:00Z", "2026-05-01T00:00:00Z"}
	for _, name := range []string{"UTC", "Europe/Berlin", "Asia/Kolkata", "America/St_Johns", "Asia/Kathmandu"} {
		zone, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range edges {
			for _, e := range edges[i+1:] {
				from, to := at(f), at(e)
				hours := focus.Hours(from, to, zone)
				if n := focus.CountHours(from, to, zone); n != len(hours) {
					t.Errorf("%s [%s, %s): CountHours %d, Hours %d", name, f, e, n, len(hours))
				}
				if end := focus.FirstHourEnd(from, to, zone); !end.Equal(hours[0].End) {
					t.Errorf("%s [%s, %s): FirstHourEnd %s, Hours' first end %s", name, f, e, end, hours[0].End)
				}
			}
		}
	}
	for _, tc := range []struct {
		from, to string
		want     int
	}{
		{"2000-01-01T00:00:00Z", "2106-02-07T00:00:00Z", 930072},
		{"0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", 87649392},
	} {
		start := time.Now()
		if n := focus.CountHours(at(tc.from), at(tc.to), time.UTC); n != tc.want {
			t.Errorf("CountHours(%s, %s) = %d, want %d", tc.from, tc.to, n, tc.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("CountHours(%s, %s) took %s", tc.from, tc.to, d)
		}
	}
}

// moneyColumns are the FOCUS money columns: printed from a Decimal at focus.MoneyScale.
var moneyColumns = []string{"BilledCost", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "ListCost", "ListUnitPrice", "x_WasteCost", "x_OverheadCost"}

// TestMoneyFromDecimals: amounts with a float's noise (2.3966666666666665, as an hour of a
// 2.4/h price comes out) are written at focus.MoneyScale in every version, in the CSV and in
// the Parquet file, whose money columns are DECIMAL(38, 12); reading the Parquet file back
// gives the CSV's cells.
func TestMoneyFromDecimals(t *testing.T) {
	p := focus.PeriodOf(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), time.UTC)
	cold := 5 * time.Second
	row := focus.Usage(report.AllocationRow{Tenant: "gamma", AllocationID: "a", Tier: "pro", Node: "node-a", Instance: "gpu0/mig0", Kind: "mig",
		Model: "A100-SXM4-40GB", Profile: "1g.5gb", Fraction: 1.0 / 7, Allocated: 3588 * time.Second, Started: p.Start,
		ListCost: 0.2278095238095238, Cost: 0.21202777777777776, WasteCost: 0.10335802469135802, OverheadCost: 0.02109347442680775,
		Currency: "USD", WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour), ColdStart: &cold}, p, focus.DefaultIssuer)
	for _, v := range []focus.Version{focus.Focus12, focus.Focus13} {
		t.Run(string(v), func(t *testing.T) {
			var c, pq bytes.Buffer
			for _, out := range []struct {
				f focus.Format
				b *bytes.Buffer
			}{{focus.CSV, &c}, {focus.Parquet, &pq}} {
				w, err := v.NewWriter(out.b, out.f)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Write(row); err != nil || w.Close() != nil {
					t.Fatal(err)
				}
			}
			rows, err := csv.NewReader(&c).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			focustest.CheckMoneyDigits(t, rows, focus.MoneyScale, moneyColumns...)
			if got := rows[1][slices.Index(rows[0], "BilledCost")]; got != "0.212027777778" {
				t.Errorf("BilledCost %s, want 0.212027777778", got)
			}
			back, err := focus.ReadParquet(bytes.NewReader(pq.Bytes()), int64(pq.Len()))
			if err != nil || len(back) != 1 {
				t.Fatalf("read back %d rows: %v", len(back), err)
			}
			if got := v.Cells(back[0]); !slices.Equal(got, rows[1]) {
				t.Errorf("Parquet row %v\nCSV row %v", got, rows[1])
			}
			f, err := parquet.OpenFile(bytes.NewReader(pq.Bytes()), int64(pq.Len()))
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range moneyColumns {
				col, ok := f.Schema().Lookup(name)
				if !ok {
					t.Fatalf("no Parquet column %s", name)
				}
				lt := col.Node.Type().LogicalType()
				var dec *format.DecimalType
				if lt != nil {
					dec, _ = lt.Value.(*format.DecimalType)
				}
				if dec == nil || dec.Scale != focus.MoneyScale || dec.Precision != 38 {
					t.Errorf("Parquet column %s: logical type %v, want DECIMAL(38, %d)", name, lt, focus.MoneyScale)
				}
			}
		})
	}
}
