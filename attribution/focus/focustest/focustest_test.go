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

// TestCheck13Refuses: Check13 passes a 1.3 Usage and Correction row as written and fails each
// row that breaks one of the 1.3 rules it checks (and still a 1.2 one).
func TestCheck13Refuses(t *testing.T) {
	p := focus.PeriodOf(time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC), time.UTC)
	usage := focus.Usage(report.AllocationRow{Tenant: "acme", AllocationID: "a1", Tier: "pro", Node: "n", Instance: "gpu0/mig1", Kind: "mig",
		Model: "A100-SXM4-40GB", Profile: "3g.20gb", Fraction: 3.0 / 7, Allocated: 50 * time.Minute, ListCost: 1.6, Cost: 1.2, Currency: "USD",
		WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour), Started: p.Start}, p, focus.DefaultIssuer)
	jan := focus.PeriodOf(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), time.UTC)
	correction := focus.Correction(report.Row{Tenant: "acme", Tier: "pro", Currency: "USD", Cost: 2, ListCost: 2}, jan, p, focus.DefaultIssuer)
	cols := focus.Focus13.Columns()
	col := func(c string) int { return slices.Index(cols, c) }
	for _, tc := range []struct {
		name  string
		row   focus.Row
		spoil func(cells []string)
		fails string // in a failure; "" passes
	}{
		{"usage as written", usage, func([]string) {}, ""},
		{"correction as written", correction, func([]string) {}, ""},
		{"no ServiceProviderName", usage, func(c []string) { c[col("ServiceProviderName")] = "" }, "ServiceProviderName null"},
		{"no HostProviderName", correction, func(c []string) { c[col("HostProviderName")] = "" }, "HostProviderName null"},
		{"another host", usage, func(c []string) { c[col("HostProviderName")] = "Elsewhere" }, "cannot choose a host"},
		{"deprecated ProviderName null", usage, func(c []string) { c[col("ProviderName")] = "" }, "ProviderName null"},
		{"no AllocatedMethodId", usage, func(c []string) { c[col("AllocatedMethodId")] = "" }, "AllocatedMethodId"},
		{"undocumented method", usage, func(c []string) { c[col("AllocatedMethodId")] = "even" }, "AllocatedMethodId"},
		{"a correction split", correction, func(c []string) { c[col("AllocatedMethodId")] = focus.MethodWhole }, "no split cost allocation"},
		{"no AllocatedResourceId", usage, func(c []string) { c[col("AllocatedResourceId")] = "" }, "AllocatedResourceId"},
		{"another GPU", usage, func(c []string) { c[col("AllocatedResourceId")] = "n/gpu1" }, "AllocatedResourceId"},
		{"details not an object", usage, func(c []string) { c[col("AllocatedMethodDetails")] = `[1]` }, "not a JSON object"},
		{"details without Elements", usage, func(c []string) { c[col("AllocatedMethodDetails")] = `{"Ratio":1}` }, "no Elements"},
		{"details key", usage, func(c []string) {
			c[col("AllocatedMethodDetails")] = strings.Replace(c[col("AllocatedMethodDetails")], `{"Elements"`, `{"Method":1,"Elements"`, 1)
		}, "neither FOCUS's nor x_"},
		{"ratio not the fraction", usage, func(c []string) {
			c[col("AllocatedMethodDetails")] = `{"Elements":[{"AllocatedRatio":0.5,"UsageQuantity":0.8333333333333334,"UsageUnit":"Hours"}]}`
		}, "x_BilledFraction"},
		{"ratio above 1", usage, func(c []string) { c[col("AllocatedMethodDetails")] = `{"Elements":[{"AllocatedRatio":2}]}` }, "(0, 1]"},
		{"quantity without unit", usage, func(c []string) {
			c[col("AllocatedMethodDetails")] = strings.Replace(c[col("AllocatedMethodDetails")], `,"UsageUnit":"Hours"`, "", 1)
		}, "UsageQuantity without UsageUnit"},
		{"quantity not the pricing quantity", usage, func(c []string) { c[col("PricingQuantity")] = "0.5" }, "PricingQuantity"},
		{"allocated tag in Tags", usage, func(c []string) { c[col("AllocatedTags")] = `{"slicemeter/node":"n"}` }, "in Tags too"},
		{"allocated tag not slicemeter's", usage, func(c []string) { c[col("AllocatedTags")] = `{"gpu":"0"}` }, "not under the prefix"},
		{"a 1.2 rule", usage, func(c []string) { c[col("InvoiceId")] = "" }, "InvoiceId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cells := focus.Focus13.Cells(tc.row)
			tc.spoil(cells)
			r := &recorder{TB: t}
			focustest.Check13(r, [][]string{cols, cells})
			got := strings.Join(r.failures, "\n")
			if tc.fails == "" && got != "" || tc.fails != "" && !strings.Contains(got, tc.fails) {
				t.Errorf("failures %q, want one naming %q", got, tc.fails)
			}
		})
	}
}

// TestMoneyDigits: an amount with more decimal places than the scale, or not a plain
// decimal, is refused; one at the scale or below passes.
func TestMoneyDigits(t *testing.T) {
	for _, tc := range []struct {
		v     string
		scale int
		ok    bool
	}{
		{"0.212027777778", 12, true}, {"2.4", 12, true}, {"", 12, true}, {"-0.5", 6, true}, {"12", 6, true},
		{"0.21202777777777776", 12, false}, {"0.2278101", 6, false}, {"1e-07", 12, false}, {"NaN", 6, false},
	} {
		if err := focustest.MoneyDigits(tc.v, tc.scale); (err == nil) != tc.ok {
			t.Errorf("MoneyDigits(%q, %d) = %v, want ok %v", tc.v, tc.scale, err, tc.ok)
		}
	}
}
