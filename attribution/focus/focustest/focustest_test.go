package focustest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/focus/focustest"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// recorder is a testing.TB that notes the failures instead of failing.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

// TestCheck12Refuses: Check12 passes a Usage and a Correction row as written and fails each
// row that breaks one of the rules it checks.
func TestCheck12Refuses(t *testing.T) {
	p := focus.PeriodOf(time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC), time.UTC)
	usage := focus.Usage(report.AllocationRow{Tenant: "acme", AllocationID: "a1", Tier: "pro", Node: "n", Instance: "gpu0", Kind: "mig",
		Model: "A100-SXM4-40GB", Profile: "3g.20gb", Fraction: 0.5, Allocated: time.Hour, ListCost: 1.6, Cost: 1.2, Currency: "USD",
		WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour)}, p, focus.DefaultIssuer)
	jan := focus.PeriodOf(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), time.UTC)
	correction := focus.Correction(report.Row{Tenant: "acme", Tier: "pro", Currency: "USD", Cost: 2, ListCost: 2}, jan, p, focus.DefaultIssuer)
	col := func(c string) int { return slices.Index(focus.Columns(), c) }
	for _, tc := range []struct {
		name  string
		row   focus.Row
		spoil func(cells []string)
		fails string // in a failure; "" passes
	}{
		{"usage as written", usage, func([]string) {}, ""},
		{"correction as written", correction, func([]string) {}, ""},
		{"no InvoiceId", usage, func(c []string) { c[col("InvoiceId")] = "" }, "InvoiceId"},
		{"ChargeClass", usage, func(c []string) { c[col("ChargeClass")] = "Refund" }, "ChargeClass"},
		{"PricingCurrency", correction, func(c []string) { c[col("PricingCurrency")] = "EUR" }, "PricingCurrency"},
		{"ServiceSubcategory", correction, func(c []string) { c[col("ServiceSubcategory")] = "GPU" }, "ServiceSubcategory"},
		{"unit", usage, func(c []string) { c[col("PricingUnit")] = "GPU hours" }, "PricingUnit"},
		{"local date-time", usage, func(c []string) { c[col("ChargePeriodEnd")] = "2026-02-01T01:00:00+00:00" }, "YYYY-MM-DDTHH:mm:ssZ"},
		{"ListUnitPrice", usage, func(c []string) { c[col("ListUnitPrice")] = "1.6" }, "ListUnitPrice × PricingQuantity"},
		{"a tag not slicemeter's", usage, func(c []string) { c[col("Tags")] = `{"team":"x"}` }, "ProviderTagPrefixes"},
		{"SkuPriceDetails key", usage, func(c []string) { c[col("SkuPriceDetails")] = `{"GpuCount":1,"Profile":"3g"}` }, "neither FOCUS's nor x_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cells := focus.Cells(tc.row)
			tc.spoil(cells)
			r := &recorder{TB: t}
			focustest.Check12(r, [][]string{focus.Columns(), cells})
			got := strings.Join(r.failures, "\n")
			if tc.fails == "" && got != "" || tc.fails != "" && !strings.Contains(got, tc.fails) {
				t.Errorf("failures %q, want one naming %q", got, tc.fails)
			}
		})
	}
}
