package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	windowStart = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	windowEnd   = windowStart.Add(time.Hour)
)

func ptr[T any](v T) *T { return &v }

// migBasic is the mig-basic scenario's report from the unrounded definitions (README.md),
// computed here by hand.
func migBasic() Report {
	acmeList := 1.60 * (1.0 / 7) * 3588 / 3600
	acmeO := 1 - (14.0/108)/(1.0/7)
	betaList := 1.60 * (2.0 / 7) * 1760 / 3600
	betaCost := betaList * 0.7
	betaO := 1 - (28.0/108)/(2.0/7)
	gammaList := 2.40 * 3595 / 3600
	gammaEff := (17950*0.2 + 18000*0.6) / 35950
	row := func(tenant, tier string, allocated, coldStart time.Duration, list, cost, o, eff float64) Row {
		return Row{
			Tenant: tenant, Tier: tier, WindowStart: windowStart, WindowEnd: windowEnd,
			Allocated: allocated, ListCost: list, Cost: cost,
			WasteCost: cost * (1 - o) * (1 - eff), OverheadCost: cost * o, Efficiency: ptr(eff),
			JitterP99: ptr(time.Duration(0)), ColdStartMax: ptr(coldStart), Currency: "USD",
		}
	}
	return Report{
		WindowStart: windowStart, WindowEnd: windowEnd, Currency: "USD",
		// Out of order on purpose: rendering sorts by tenant.
		Tenants: []Row{
			row("gamma", "pro", 3595*time.Second, 5*time.Second, gammaList, gammaList, 0, gammaEff),
			row("acme", "pro", 3588*time.Second, 12*time.Second, acmeList, acmeList, acmeO, 0.5),
			row("beta", "budget", 1760*time.Second, 40*time.Second, betaList, betaCost, betaO, 0.8),
		},
		UnallocatedListCost: 1.60 + 2.40 - acmeList - betaList - gammaList,
	}
}

// TestMigBasicMatchesExpected renders the hand-computed mig-basic report and compares it with
// the scenario's expected report, byte for byte.
func TestMigBasicMatchesExpected(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "schemas", "scenario", "testdata", "mig-basic.expected.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := migBasic().WriteCSV(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("CSV:\n%s\nwant:\n%s", got.String(), want)
	}
}

// edgeCases exercises empty cells, rounding and quoting.
func edgeCases() Report {
	start := time.Date(2026, 1, 5, 12, 0, 0, 500_000_000, time.FixedZone("CET", 3600))
	end := start.Add(90 * time.Minute)
	return Report{
		WindowStart: start, WindowEnd: end, Currency: "EUR",
		Tenants: []Row{
			{
				// Only vGPU allocations and no waits, never attached, nothing metered.
				Tenant: "zeta, inc", Tier: "budget", WindowStart: start, WindowEnd: end,
				Allocated: 1500 * time.Millisecond, ListCost: 0.0000004, Cost: 0.0000003,
				Unmetered: 1500 * time.Millisecond, Currency: "EUR",
			},
			{
				Tenant: "alpha", Tier: "pro", WindowStart: start, WindowEnd: end,
				Allocated: 5400 * time.Second, ListCost: 1.23456750000001, Cost: 1.2345675, WasteCost: -0.0000001,
				OverheadCost: 0.0123, Efficiency: ptr(0.99995), JitterP99: ptr(4060 * time.Microsecond),
				ColdStartMax: ptr(45500 * time.Millisecond), ColdStartBreaches: 2, Unmetered: 120 * time.Second,
				Currency: "EUR", MemoryEfficiency: ptr(0.123456), EnergyKWh: ptr(1.23456789),
			},
		},
		UnallocatedListCost: -0.25,
	}
}

func TestGolden(t *testing.T) {
	reports := map[string]Report{"mig-basic": migBasic(), "edge-cases": edgeCases()}
	for name, r := range reports {
		for _, f := range []Format{CSV, JSON} {
			t.Run(name+"."+string(f), func(t *testing.T) {
				var got bytes.Buffer
				if err := r.Write(&got, f); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", name+"."+string(f)+".golden")
				if *update {
					if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if got.String() != string(want) {
					t.Errorf("%s:\n%s\nwant:\n%s", path, got.String(), want)
				}
			})
		}
	}
}

// TestJSONMatchesCSV checks that JSON holds the same fields as CSV: numbers as numbers, empty
// as null.
func TestJSONMatchesCSV(t *testing.T) {
	r := edgeCases()
	var csvOut, jsonOut bytes.Buffer
	if err := r.WriteCSV(&csvOut); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&jsonOut); err != nil {
		t.Fatal(err)
	}
	var objects []map[string]json.RawMessage
	if err := json.Unmarshal(jsonOut.Bytes(), &objects); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csvOut.String()), "\n")
	if len(objects) != len(lines)-1 {
		t.Fatalf("%d JSON objects, %d CSV rows", len(objects), len(lines)-1)
	}
	for i, cells := range must(r.cells()) {
		for j, c := range cells {
			raw := string(objects[i][Header()[j]])
			switch {
			case c.text == "" && raw != "null":
				t.Errorf("row %d %s: JSON %s, want null", i, Header()[j], raw)
			case c.text != "" && c.number && raw != c.text:
				t.Errorf("row %d %s: JSON %s, want the number %s", i, Header()[j], raw, c.text)
			case c.text != "" && !c.number && raw != string(must(json.Marshal(c.text))):
				t.Errorf("row %d %s: JSON %s, want the string %q", i, Header()[j], raw, c.text)
			}
		}
	}
}

func TestRowsOrder(t *testing.T) {
	rows := migBasic().Rows()
	var names []string
	for _, r := range rows {
		names = append(names, r.Tenant)
	}
	if got := strings.Join(names, " "); got != "acme beta gamma __unallocated__" {
		t.Errorf("row order: %s", got)
	}
}

// Correction lines follow the __unallocated__ row, marked by their tier; a __unallocated__
// correction keeps its tier and list cost, and a tenant's view keeps only its own.
func TestCorrectionRows(t *testing.T) {
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	start, end := at("2026-12-01T00:00:00Z"), at("2027-01-01T00:00:00Z")
	r := Report{WindowStart: start, WindowEnd: end, Currency: "USD", UnallocatedListCost: 10,
		Tenants: []Row{{Tenant: "b", Tier: "pro", WindowStart: start, WindowEnd: end, Allocated: time.Hour, ListCost: 1, Cost: 1, Currency: "USD"}},
		Corrections: []Row{
			{Tenant: "a", Tier: CorrectionTier("2026-11"), WindowStart: start, WindowEnd: end, Allocated: -time.Minute, ListCost: -0.5, Cost: -0.35, Currency: "USD"},
			{Tenant: Unallocated, Tier: CorrectionTier("2026-11"), WindowStart: start, WindowEnd: end, ListCost: 0.5, Currency: "USD"},
		}}
	tests := []struct {
		name string
		r    Report
		want []string
	}{
		{"all", r, []string{
			"b,pro,2026-12-01T00:00:00Z,2027-01-01T00:00:00Z,3600.000,1.000000,1.000000,0.000000,0.000000,,,,0,0.000,USD",
			"__unallocated__,,2026-12-01T00:00:00Z,2027-01-01T00:00:00Z,,10.000000,,,,,,,,,USD",
			"a,correction:2026-11,2026-12-01T00:00:00Z,2027-01-01T00:00:00Z,-60.000,-0.500000,-0.350000,0.000000,0.000000,,,,0,0.000,USD",
			"__unallocated__,correction:2026-11,2026-12-01T00:00:00Z,2027-01-01T00:00:00Z,,0.500000,,,,,,,,,USD",
		}},
		{"tenant a", r.Only("a"), []string{
			"a,correction:2026-11,2026-12-01T00:00:00Z,2027-01-01T00:00:00Z,-60.000,-0.500000,-0.350000,0.000000,0.000000,,,,0,0.000,USD",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := tt.r.WriteCSV(&b); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")[1:]
			if strings.Join(lines, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
	if !IsCorrection("correction:2026-11") || IsCorrection("pro") {
		t.Error("IsCorrection")
	}
}

func TestFixed(t *testing.T) {
	tests := []struct {
		v        float64
		decimals int
		want     string
	}{
		{0.2278095238, 6, "0.227810"},
		{1.1520317460, 6, "1.152032"},
		{0.400278164, 4, "0.4003"},
		{3588, 3, "3588.000"},
		{-0.0000001, 6, "0.000000"},
		{math.Copysign(0, -1), 4, "0.0000"},
		{-0.25, 6, "-0.250000"},
		{4.06, 3, "4.060"},
	}
	for _, tt := range tests {
		if got := fixed(tt.v, tt.decimals); got != tt.want {
			t.Errorf("fixed(%v, %d) = %s, want %s", tt.v, tt.decimals, got, tt.want)
		}
	}
}

func TestNonFiniteIsAnError(t *testing.T) {
	r := migBasic()
	r.Tenants[0].Cost = math.NaN()
	if err := r.WriteCSV(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "cost is NaN") {
		t.Errorf("WriteCSV with a NaN cost: %v", err)
	}
	if err := r.WriteJSON(&bytes.Buffer{}); err == nil {
		t.Error("WriteJSON with a NaN cost: want an error")
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"csv", "json"} {
		if f, err := ParseFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseFormat(%q) = %q, %v", s, f, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("ParseFormat(xml): %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCSVEscapesFormulaCells(t *testing.T) {
	r := migBasic()
	r.Currency = "@USD"
	r.Tenants[0].Tenant = `=HYPERLINK("http://x","y")`
	r.Tenants[0].Tier = "+pro"
	r.Tenants[1].Tenant = "-1"
	r.Tenants[2].Tenant = "\tcmd"
	var buf bytes.Buffer
	if err := r.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{`"'=HYPERLINK(""http://x"",""y"")",'+pro,`, "\n'-1,", "\n'\tcmd,", ",'@USD\n", "\n__unallocated__,,"} {
		if !strings.Contains(out, want) {
			t.Errorf("CSV lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Split(line, ","); len(f) > 4 && strings.HasPrefix(f[4], "'") {
			t.Errorf("a number cell was escaped: %s", line)
		}
	}
	// JSON is not evaluated by spreadsheets: its strings stay as they are.
	buf.Reset()
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"tenant": "-1"`) {
		t.Errorf("JSON changed the tenant:\n%s", buf.String())
	}
}

func TestSpreadsheetSafe(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "acme": "acme", "=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@a": "'@a",
		"\ta": "'\ta", "\ra": "'\ra", "__unallocated__": "__unallocated__", "a=b": "a=b", "2026-01-05T00:00:00Z": "2026-01-05T00:00:00Z",
	} {
		if got := SpreadsheetSafe(in); got != want {
			t.Errorf("SpreadsheetSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestJSONUnpricedNotes: a window with something unpriced gives its __unallocated__ row the
// notes of what was left out; tenant rows, a tenant's view, the CSV and a window without
// anything unpriced are as before.
func TestJSONUnpricedNotes(t *testing.T) {
	plain := migBasic()
	withUnpriced := migBasic()
	withUnpriced.Unpriced = []Unpriced{
		{Kind: UnpricedModel, Name: "B200", GPUs: 1, GPUTime: time.Hour},
		{Kind: UnpricedTier, Name: "gold", Allocations: 2, Tenants: []string{"al", "bo"}, Allocated: 90 * time.Second},
	}
	withUnpriced.Notes = []string{"tenant \"x\" has allocations at tiers a, b"} // other notes stay in the log
	render := func(s Series) (string, []map[string]json.RawMessage) {
		var b bytes.Buffer
		if err := s.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		var objects []map[string]json.RawMessage
		if err := json.Unmarshal(b.Bytes(), &objects); err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		return b.String(), objects
	}
	wantNotes := `["unpriced: GPU model \"B200\" has no price in the price book: 1 GPU(s), 3600.000 GPU-seconds, left out of the capacity",` +
		`"unpriced: tier \"gold\" is not in the price book: 2 allocation(s) of tenant(s) [\"al\" \"bo\"], 90.000 billed seconds, left out of the money"]`

	_, objects := render(Series{plain, withUnpriced})
	for i, o := range objects {
		notes, has := o["notes"]
		if want := i == len(objects)-1; has != want {
			t.Errorf("row %d (%s): has notes %v, want %v", i, o["tenant"], has, want)
		}
		var compact bytes.Buffer
		if has && (json.Compact(&compact, notes) != nil || compact.String() != wantNotes) {
			t.Errorf("notes %s\nwant %s", notes, wantNotes)
		}
	}
	if text, _ := render(Series{withUnpriced.Only("acme")}); strings.Contains(text, "notes") {
		t.Errorf("a tenant's view has the fleet's notes:\n%s", text)
	}
	var a, b bytes.Buffer
	if err := plain.WriteCSV(&a); err != nil {
		t.Fatal(err)
	}
	if err := withUnpriced.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("the CSV changed with Unpriced:\n%s\nwant\n%s", b.String(), a.String())
	}
}

// TestOnlyNamesNoOtherTenant: a report restricted to some tenants (a tenant's or a scoped
// caller's view) says that a co-tenant was noisy and how much, never which one, unless the
// neighbour is among the tenants it may read.
func TestOnlyNamesNoOtherTenant(t *testing.T) {
	share := 0.25
	r := Report{Tenants: []Row{
		{Tenant: "acme", NoisyNeighbour: "beta", NoisyNeighbourShare: &share},
		{Tenant: "beta", NoisyNeighbour: "acme", NoisyNeighbourShare: &share},
		{Tenant: "gamma", NoisyNeighbour: "acme"},
		{Tenant: "delta"},
	}}
	for _, tc := range []struct {
		only []string
		want map[string]string // tenant → noisy_neighbour
	}{
		{[]string{"acme"}, map[string]string{"acme": AnotherTenant}},
		{[]string{"acme", "beta"}, map[string]string{"acme": "beta", "beta": "acme"}},
		{[]string{"gamma", "delta"}, map[string]string{"gamma": AnotherTenant, "delta": ""}},
	} {
		o := r.Only(tc.only...)
		var text strings.Builder
		if err := (Series{o}).WriteJSON(&text); err != nil {
			t.Fatal(err)
		}
		for _, row := range o.Tenants {
			if row.NoisyNeighbour != tc.want[row.Tenant] {
				t.Errorf("Only(%v): %s's noisy neighbour %q, want %q", tc.only, row.Tenant, row.NoisyNeighbour, tc.want[row.Tenant])
			}
		}
		for _, name := range []string{"acme", "beta", "gamma", "delta"} {
			if !slices.Contains(tc.only, name) && strings.Contains(text.String(), `"`+name+`"`) {
				t.Errorf("Only(%v): the JSON names %s:\n%s", tc.only, name, text.String())
			}
		}
		if tc.only[0] == "acme" && !strings.Contains(text.String(), `"noisy_neighbour_share": 0.2500`) {
			t.Errorf("Only(%v): the JSON lacks acme's share:\n%s", tc.only, text.String())
		}
	}
	if r.Tenants[0].NoisyNeighbour != "beta" {
		t.Errorf("Only changed the report it restricts")
	}
}
