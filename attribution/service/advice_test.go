package service

import (
	"math/big"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/advice"
)

// TestAdviceGauges: the advice's savings per tenant and GPU-equivalents freed per model and
// fleet, as promtool accepts them. Two allocations over a 2 h window: a whole A100 used an
// hour, advised 1g.5gb, frees (1 − 1/7) × 1 h / 2 h = 3/7; a 3g.20gb kept frees nothing.
func TestAdviceGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newAdviceMetrics(reg)
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	m.set(advice.Result{From: from, To: from.Add(2 * time.Hour), Currency: "USD", Rows: []advice.Row{
		{AllocationID: "a", Tenant: "acme", Model: "A100-SXM4-40GB", Action: advice.Downsize, Fraction: big.NewRat(1, 1),
			AdvisedFraction: big.NewRat(1, 7), Billed: time.Hour, Savings: decimal.RequireFromString("1.371428571429"),
			Savings30d: decimal.RequireFromString("493.714285714286")},
		{AllocationID: "b", Tenant: "beta", Model: "A100-SXM4-40GB", Action: advice.Keep, Fraction: big.NewRat(3, 7),
			AdvisedFraction: big.NewRat(3, 7), Billed: 2 * time.Hour},
	}}, from)
	want := `
# HELP slicemeter_advice_gpu_equivalents_freed GPU-equivalents (Σ billed fraction × billed time / window) that right-sizing the last 7 days' allocations would free, per GPU model (model="__fleet__": the whole fleet).
# TYPE slicemeter_advice_gpu_equivalents_freed gauge
slicemeter_advice_gpu_equivalents_freed{model="A100-SXM4-40GB"} 0.42857142857142855
slicemeter_advice_gpu_equivalents_freed{model="__fleet__"} 0.42857142857142855
# HELP slicemeter_advice_savings_30d What right-sizing the tenant's allocations as ` + "`slicemeter advise`" + ` advises would save over 30 days, at the last 7 days' use, in the price book's currency.
# TYPE slicemeter_advice_savings_30d gauge
slicemeter_advice_savings_30d{currency="USD",tenant="acme"} 493.714285714286
slicemeter_advice_savings_30d{currency="USD",tenant="beta"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "slicemeter_advice_savings_30d", "slicemeter_advice_gpu_equivalents_freed"); err != nil {
		t.Error(err)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// An advice that found nothing billed (a fresh install's first pass) is computed again within
// a minute, not an hour later.
func TestNextAdvice(t *testing.T) {
	now := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		res  advice.Result
		want time.Duration
	}{
		{"nothing billed", advice.Result{}, adviceRetryEmpty},
		{"advice", advice.Result{Rows: []advice.Row{{Tenant: "acme"}}}, adviceEvery},
	} {
		if got := nextAdvice(now, c.res).Sub(now); got != c.want {
			t.Errorf("%s: next in %v, want %v", c.name, got, c.want)
		}
	}
}
