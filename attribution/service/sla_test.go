package service

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

func TestSLAMetricsExposition(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	book := &pricebook.PriceBook{Currency: "USD", Tiers: map[string]float64{"pro": 1, "budget": 0.7},
		ColdStart: map[string]time.Duration{"pro": 30 * time.Second}, JitterP99: map[string]time.Duration{"pro": 5 * time.Millisecond}}
	m := newSLAMetrics(reg, book)
	eff, jitter, cold := 0.5, 4060*time.Microsecond, 45*time.Second
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	// Two minutes of continuous attribution: acme's allocation breaches its 30 s cold start
	// (observed once, not per minute); the second minute is recomputed with a higher cost.
	line := billing.Line{AllocationID: "a1", Tenant: "acme", Tier: "pro", Cost: 0.25, WasteCost: 0.1, OverheadCost: 0.05, ColdStart: &cold, ColdStartSLA: 30 * time.Second, JitterP99: &jitter}
	over := 6 * time.Millisecond
	minute := func(at time.Time, cost float64) stored.Minute {
		l := line
		l.Cost = cost
		return stored.Minute{Start: at, Report: report.Report{Currency: "USD"}, Lines: []billing.Line{l}}
	}
	m.Minute(minute(start, 0.25), true, nil)
	m.Minute(minute(start.Add(time.Minute), 0.25), true, nil)
	jittery := minute(start.Add(2*time.Minute), 0)
	jittery.Lines[0].JitterP99 = &over // over pro's 5 ms
	m.Minute(jittery, true, nil)
	m.Minute(minute(start.Add(time.Minute), 0.5), false, []error{&billing.InvariantError{Invariant: billing.InvariantCostSplit, Detail: "x"}})
	m.Minute(minute(start.Add(-time.Hour), 9), false, nil) // recomputed, never counted here: not counted now
	m.set(report.Report{WindowStart: start, WindowEnd: start.Add(time.Hour), Currency: "USD", UnallocatedListCost: 1.5,
		Tenants: []report.Row{
			{Tenant: "acme", Tier: "pro", Currency: "USD", Cost: 1, ListCost: 1, WasteCost: 0.4, OverheadCost: 0.1, Efficiency: &eff, JitterP99: &jitter, ColdStartMax: &cold, ColdStartBreaches: 1},
			{Tenant: "idle", Tier: "budget", Currency: "USD"}, // no efficiency, jitter or cold start: no series
		}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	text := buf.String()
	for _, want := range []string{
		`slicemeter_tenant_jitter_p99_seconds{currency="USD",tenant="acme",tier="pro"} 0.00406`,
		`slicemeter_tenant_cold_start_breaches{currency="USD",tenant="acme",tier="pro"} 1`,
		`slicemeter_unallocated_list_cost{currency="USD"} 1.5`,
		`slicemeter_attribution_last_success_timestamp_seconds 1.7675748e+09`,
		`slicemeter_tenant_cost_total{currency="USD",tenant="acme",tier="pro"} 0.75`,
		`slicemeter_tenant_waste_cost_total{currency="USD",tenant="acme",tier="pro"} 0.3`,
		`slicemeter_cold_start_seconds_count{tier="pro"} 1`,
		`slicemeter_cold_start_seconds_bucket{tier="pro",le="45"} 1`,
		`slicemeter_cold_start_seconds_bucket{tier="pro",le="30"} 0`,
		`slicemeter_cold_start_breaches_total{tenant="acme",tier="pro"} 1`,
		`slicemeter_attribution_invariant_violations_total{invariant="cost_split"} 1`,
		`slicemeter_attribution_windows_stored_total{kind="recomputed"} 2`,
		`slicemeter_sla_jitter_p99_limit_seconds{tier="pro"} 0.005`,
		`slicemeter_jitter_breaches_total{tenant="acme",tier="pro"} 1`,
		`slicemeter_sla_cold_start_limit_seconds{tier="budget"} 30`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %s\n%s", want, text)
		}
	}
	if strings.Contains(text, `slicemeter_tenant_efficiency_ratio{currency="USD",tenant="idle"`) {
		t.Error("a tenant without metered time has an efficiency series")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed")
		}
		t.Fatal("promtool not found: run make deps (Debian package prometheus)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestUnpricedSeconds: what the stored minutes attribute as unpriced is counted by kind and
// name, a recomputed minute adding only its increase; allocations that failed, once.
func TestUnpricedSeconds(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := newSLAMetrics(reg, &pricebook.PriceBook{Currency: "USD"})
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	minute := func(at time.Time, fresh bool, gold time.Duration) {
		m.Minute(stored.Minute{Start: at, Report: report.Report{Currency: "USD", Unpriced: []report.Unpriced{
			{Kind: report.UnpricedModel, Name: "B200", GPUs: 1, GPUTime: time.Minute, Allocations: 1, Allocated: 20 * time.Second},
			{Kind: report.UnpricedTier, Name: "gold", Allocations: 1, Allocated: gold},
		}}}, fresh, nil)
	}
	minute(start, true, 30*time.Second)
	minute(start.Add(time.Minute), true, 0)
	minute(start, false, 45*time.Second)                   // late samples: 15 s more
	minute(start.Add(time.Minute), false, 0)               // unchanged: nothing more
	minute(start.Add(-time.Hour), false, 1000*time.Second) // recomputed, never counted here: not counted now
	// An allocation left out because computing it failed: counted when first attributed.
	failed := stored.Minute{Start: start.Add(2 * time.Minute), Report: report.Report{Failed: []string{"price allocation x: MIG compute slices 0"}}}
	m.Minute(failed, true, nil)
	m.Minute(failed, false, nil)
	if got := testutil.ToFloat64(m.computeErrs.WithLabelValues("allocation")); got != 1 {
		t.Errorf(`slicemeter_attribution_computation_errors_total{scope="allocation"} = %g, want 1`, got)
	}
	for _, tt := range []struct {
		kind, name string
		want       float64
	}{{"model", "B200", 120}, {"tier", "gold", 45}} {
		if got := testutil.ToFloat64(m.unpriced.WithLabelValues(tt.kind, tt.name)); got != tt.want {
			t.Errorf("slicemeter_attribution_unpriced_seconds_total{kind=%q,name=%q} = %g, want %g", tt.kind, tt.name, got, tt.want)
		}
	}
}
