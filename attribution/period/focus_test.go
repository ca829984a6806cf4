package period_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/focus/focustest"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// TestCloseExportsFOCUS closes February and March from the stored minutes with an export
// directory, a late pass over a day of February between them: each close writes the month's
// FOCUS CSV, Parquet and metadata; the Usage rows' BilledCost sums to each tenant's cost of
// the closed report, March's file bills February's late day as a Correction row, the Parquet
// file holds the CSV's rows, both months' CSV keeps the FOCUS 1.3 rules (focustest.Check13,
// the default version; Correction rows carry no split-cost cells) with money at
// focus.MoneyScale, the metadata's one time sector is complete (the month is closed), and the
// FOCUS validator passes both months' CSV and Parquet.
func TestCloseExportsFOCUS(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	storeMinutes(t, conn, day(time.February, 1), day(time.April, 1), time.Time{}, time.Time{}, day(time.May, 1))
	dir := t.TempDir()
	closer := period.Closer{Conn: conn, Book: chtest.Book(), Options: attribution.Options{FromMinutes: true},
		Export: &focus.MonthlyExport{Dir: dir, Issuer: "GPU Cloud Inc."}}
	closedFeb, err := closer.Close(ctx, feb, day(time.May, 2))
	if err != nil {
		t.Fatal(err)
	}
	storeMinutes(t, conn, day(time.February, 20), day(time.February, 21), day(time.February, 20), day(time.February, 21), day(time.May, 3))
	closedMar, err := closer.Close(ctx, mar, day(time.May, 4))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		closed      period.Closed
		usage       int // rows: acme's hours
		corrections map[string]float64
	}{
		{closedFeb, 28 * 24, nil},
		{closedMar, 31 * 24, map[string]float64{"beta": 38.4}},
	} {
		name := tc.closed.Period.String()
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, "focus-"+name)
			f, err := os.Open(base + ".csv")
			if err != nil {
				t.Fatal(err)
			}
			rows, err := csv.NewReader(f).ReadAll()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			focustest.Check13(t, rows) // the Correction rows appear only here
			focustest.CheckMoneyDigits(t, rows, focus.MoneyScale, "BilledCost", "ContractedCost", "EffectiveCost", "ListCost",
				"ListUnitPrice", "ContractedUnitPrice", "x_WasteCost", "x_OverheadCost")
			col := func(c string) int { return slices.Index(rows[0], c) }
			usage, billed, corrections := 0, map[string]float64{}, map[string]float64{}
			for _, r := range rows[1:] {
				cost, err := strconv.ParseFloat(r[col("BilledCost")], 64)
				if err != nil {
					t.Fatal(err)
				}
				if r[col("InvoiceIssuerName")] != "GPU Cloud Inc." || r[col("BillingPeriodStart")] != tc.closed.Start.Format(focus.DateTime) ||
					r[col("InvoiceId")] != r[col("BillingAccountId")]+"/"+name {
					t.Errorf("row %v", r)
				}
				if r[col("ChargeClass")] == "Correction" {
					corrections[r[col("BillingAccountId")]] += cost
					if r[col("x_CorrectedPeriod")] != "2026-02" || r[col("ChargePeriodStart")] != "2026-02-01T00:00:00Z" || r[col("ChargePeriodEnd")] != "2026-03-01T00:00:00Z" {
						t.Errorf("correction row %v", r)
					}
					continue
				}
				usage++
				billed[r[col("BillingAccountId")]] += cost
			}
			if usage != tc.usage {
				t.Errorf("%d Usage rows, want %d", usage, tc.usage)
			}
			if want := tc.closed.Cost.InexactFloat64(); math.Abs(billed["acme"]-want) > 1e-6 || len(billed) != 1 {
				t.Errorf("Σ BilledCost of the Usage rows %v, the closed report's cost %v", billed, want)
			}
			if len(corrections) != len(tc.corrections) || math.Abs(corrections["beta"]-tc.corrections["beta"]) > 1e-6 {
				t.Errorf("corrections %v, want %v", corrections, tc.corrections)
			}
			pq, err := focus.ReadParquetFile(base + ".parquet")
			if err != nil {
				t.Fatal(err)
			}
			if len(pq) != len(rows)-1 || !slices.Equal(focus.Cells(pq[len(pq)-1]), rows[len(rows)-1]) {
				t.Errorf("the Parquet file has %d rows, the CSV %d", len(pq), len(rows)-1)
			}
			b, err := os.ReadFile(base + ".metadata.json")
			if err != nil {
				t.Fatal(err)
			}
			focustest.CheckMetadata13(t, b, true, true)
			var m focus.Metadata
			if err := json.Unmarshal(b, &m); err != nil || len(m.Recency) != 1 || len(m.Recency[0].TimeSectors) != 1 ||
				m.Recency[0].TimeSectors[0].TimeSectorStart != tc.closed.Start.UTC().Format(focus.DateTime) {
				t.Errorf("metadata: %v %+v", err, m.Recency)
			}
			localtest.ValidateFOCUS(t, base+".csv")
			localtest.ValidateFOCUS(t, base+".parquet")
		})
	}
	// The stream of hours from the stored minutes gives the rows a report per hour gives, also
	// with a batch of March 1's minutes stored twice.
	storeMinutes(t, conn, day(time.March, 1), day(time.March, 2), time.Time{}, time.Time{}, day(time.May, 1))
	e := focus.ForAttribution(conn, chtest.Book(), attribution.Options{FromMinutes: true, Now: day(time.May, 4)}, nil)
	streamed := exportDay(t, e)
	e.Stream = nil
	if hourly := exportDay(t, e); !slices.Equal(streamed, hourly) || len(hourly) != 24 {
		t.Errorf("a day streamed:\n%s\nhour by hour:\n%s", strings.Join(streamed, "\n"), strings.Join(hourly, "\n"))
	}
}

// exportDay is the CSV rows of March 1's export, sorted.
func exportDay(t *testing.T, e focus.Export) []string {
	t.Helper()
	var b strings.Builder
	w, _ := focus.NewWriter(&b, focus.CSV)
	if _, err := e.Usage(context.Background(), day(time.March, 1), day(time.March, 2), w); err != nil || w.Close() != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")[1:]
	slices.Sort(lines)
	return lines
}
