package focus_test

import (
	"io"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// BenchmarkRows is the Go side of an export, without ClickHouse: a line item made a FOCUS
// row and written, per row (go test -run '^$' -bench Rows ./attribution/focus/).
func BenchmarkRows(b *testing.B) {
	p := focus.PeriodOf(time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC), time.UTC)
	eff, cold := 0.45, 12*time.Second
	a := report.AllocationRow{Tenant: "tenant-3", AllocationID: "a123", Tier: "pro", Node: "node-17", Instance: "gpu0/mig3", Kind: "mig",
		Model: "A100-SXM4-40GB", Profile: "1g.5gb", Fraction: 1. / 7, Allocated: time.Hour, Measured: time.Hour, ListCost: 1.6 / 7,
		Cost: 1.6 / 7, WasteCost: 0.1, OverheadCost: 0.02, Efficiency: &eff, Overhead: 0.0926, ColdStart: &cold, Currency: "USD",
		WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour)}
	for _, f := range []focus.Format{focus.CSV, focus.Parquet} {
		b.Run(string(f), func(b *testing.B) {
			w, err := focus.NewWriter(io.Discard, f)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := w.Write(focus.Usage(a, p, focus.DefaultIssuer)); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
