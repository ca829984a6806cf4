package service

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// slaMetrics serve the latest report of the trailing window as per-tenant gauges, and count
// what the continuous attribution adds minute by minute.
type slaMetrics struct {
	mu       sync.RWMutex
	latest   *report.Report
	duration prometheus.Histogram
	errors   prometheus.Counter
	lastOK   prometheus.Gauge

	passDuration prometheus.Histogram
	minutes      *prometheus.CounterVec
	cost         *prometheus.CounterVec
	waste        *prometheus.CounterVec
	overhead     *prometheus.CounterVec
	coldStart    *prometheus.HistogramVec
	breaches     *prometheus.CounterVec
	jitterOver   *prometheus.CounterVec
	violations   *prometheus.CounterVec
	unpriced     *prometheus.CounterVec
	computeErrs  *prometheus.CounterVec

	book *pricebook.PriceBook // the SLA limits per tier

	// counted is what the counters hold per minute and allocation, for the minutes a
	// recomputation may still touch: a recomputed minute adds only its increases.
	counted map[time.Time]map[string][3]float64
	// unpricedCounted is the same for the unpriced seconds, by kind and name.
	unpricedCounted map[time.Time]map[[2]string]float64
	// coldSeen are the allocations whose cold start was observed (once each), by last minute seen.
	coldSeen map[string]time.Time
}

// The scopes of slicemeter_attribution_computation_errors_total.
const (
	scopeMinute     = "minute"
	scopeAllocation = "allocation"
)

var (
	tenantLabels    = []string{"tenant", "tier", "currency"}
	descCost        = prometheus.NewDesc("slicemeter_tenant_cost", "Cost of the tenant's allocations in the trailing window, in the price book's currency.", tenantLabels, nil)
	descListCost    = prometheus.NewDesc("slicemeter_tenant_list_cost", "List cost (before the tier multiplier) in the trailing window.", tenantLabels, nil)
	descWaste       = prometheus.NewDesc("slicemeter_tenant_waste_cost", "Cost of held but idle capacity in the trailing window.", tenantLabels, nil)
	descOverhead    = prometheus.NewDesc("slicemeter_tenant_overhead_cost", "Cost eaten by virtualization (MIG SM loss, vGPU switching) in the trailing window.", tenantLabels, nil)
	descEfficiency  = prometheus.NewDesc("slicemeter_tenant_efficiency_ratio", "Metered-time-weighted efficiency of the tenant's allocations.", tenantLabels, nil)
	descJitter      = prometheus.NewDesc("slicemeter_tenant_jitter_p99_seconds", "Nearest-rank p99 of the waits between the tenant's vGPU run slices over the sliding trailing window.", tenantLabels, nil)
	descColdStart   = prometheus.NewDesc("slicemeter_tenant_cold_start_max_seconds", "Longest cold start of the tenant's allocations in the trailing window.", tenantLabels, nil)
	descBreaches    = prometheus.NewDesc("slicemeter_tenant_cold_start_breaches", "Allocations in the trailing window whose cold start exceeded the tier's SLA.", tenantLabels, nil)
	descUnmetered   = prometheus.NewDesc("slicemeter_tenant_unmetered_seconds", "Billed time without samples (exporter outages) in the trailing window.", tenantLabels, nil)
	descUnallocated = prometheus.NewDesc("slicemeter_unallocated_list_cost", "Fleet capacity list cost that no tenant held in the trailing window.", []string{"currency"}, nil)
	descJitterLimit = prometheus.NewDesc("slicemeter_sla_jitter_p99_limit_seconds", "The tier's p99 scheduling jitter limit from the price book (tiers without one have no series).", []string{"tier"}, nil)
	descColdLimit   = prometheus.NewDesc("slicemeter_sla_cold_start_limit_seconds", "The tier's cold-start limit from the price book.", []string{"tier"}, nil)
)

func newSLAMetrics(reg prometheus.Registerer, book *pricebook.PriceBook) *slaMetrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, tenantLabels)
	}
	m := &slaMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "slicemeter_attribution_duration_seconds", Help: "Time to attribute the trailing window.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_attribution_errors_total", Help: "Attribution runs that failed.",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slicemeter_attribution_last_success_timestamp_seconds", Help: "End of the latest window attributed successfully.",
		}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "slicemeter_attribution_pass_duration_seconds", Help: "Time to attribute the closed minutes of one pass and store them.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		minutes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_attribution_windows_stored_total", Help: "One-minute windows attributed and stored, the first time (fresh) or again (recomputed).",
		}, []string{"kind"}),
		cost:     counter("slicemeter_tenant_cost_total", "Cost of the tenant's allocations, minute by minute as attributed, in the price book's currency."),
		waste:    counter("slicemeter_tenant_waste_cost_total", "Cost of the tenant's held but idle capacity, minute by minute as attributed."),
		overhead: counter("slicemeter_tenant_overhead_cost_total", "Cost eaten by virtualization for the tenant, minute by minute as attributed."),
		coldStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "slicemeter_cold_start_seconds", Help: "Cold start of each allocation (first attached sample − requested_at), per tier.",
			Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600},
		}, []string{"tier"}),
		breaches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_cold_start_breaches_total", Help: "Allocations whose cold start exceeded their tier's SLA.",
		}, []string{"tenant", "tier"}),
		jitterOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_jitter_breaches_total", Help: "Allocation-minutes whose p99 scheduling jitter exceeded the tier's jitter_p99 limit (tiers with one).",
		}, []string{"tenant", "tier"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_attribution_invariant_violations_total", Help: "Invariant violations found in attributed minutes and windows, by invariant (capacity, cost_split, efficiency, unmetered, overlap).",
		}, []string{"invariant"}),
		unpriced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_attribution_unpriced_seconds_total",
			Help: "Seconds attributed as unpriced in the stored minutes, left out of the money and the capacity because the price book lacks them: kind=\"model\" counts the GPU-seconds of GPUs of a model without a price (name: the model), kind=\"tier\" the billed seconds of allocations at an unknown tier (name: the tier).",
		}, []string{"kind", "name"}),
		computeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_attribution_computation_errors_total",
			Help: "Computations that failed and were left out while the rest went on: scope=\"minute\" a minute a pass could not attribute (not stored by it), scope=\"allocation\" an allocation left out of a minute as first attributed.",
		}, []string{"scope"}),
		book:            book,
		counted:         map[time.Time]map[string][3]float64{},
		unpricedCounted: map[time.Time]map[[2]string]float64{},
		coldSeen:        map[string]time.Time{},
	}
	m.minutes.WithLabelValues("fresh")
	m.computeErrs.WithLabelValues(scopeMinute)
	m.computeErrs.WithLabelValues(scopeAllocation)
	m.minutes.WithLabelValues("recomputed")
	for _, inv := range []string{billing.InvariantCapacity, billing.InvariantCostSplit, billing.InvariantEfficiency, billing.InvariantMetered, billing.InvariantOverlap} {
		m.violations.WithLabelValues(inv)
	}
	reg.MustRegister(m, m.duration, m.errors, m.lastOK, m.passDuration, m.minutes, m.cost, m.waste, m.overhead, m.coldStart, m.breaches, m.jitterOver, m.violations, m.unpriced, m.computeErrs)
	return m
}

// watchLag exports how far the stored minutes are behind the wall clock.
func (m *slaMetrics) watchLag(reg prometheus.Registerer, runner interface{ Done() time.Time }) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "slicemeter_attribution_lag_seconds", Help: "Wall clock minus the end of the latest minute attributed and stored.",
	}, func() float64 {
		done := runner.Done()
		if done.IsZero() {
			return 0
		}
		return time.Since(done).Seconds()
	}))
}

// Minute implements Observer: the counters grow by what each minute adds.
func (m *slaMetrics) Minute(mi stored.Minute, fresh bool, violations []error) {
	m.countViolations(violations)
	kind := "fresh"
	if !fresh {
		kind = "recomputed"
	}
	m.minutes.WithLabelValues(kind).Inc()
	if fresh {
		m.computeErrs.WithLabelValues(scopeAllocation).Add(float64(len(mi.Report.Failed)))
	}
	prev, tracked := m.counted[mi.Start]
	if !fresh && !tracked {
		// Recomputed before this process counted it (a restart): counting it would count it twice.
		return
	}
	m.countUnpriced(mi)
	now := map[string][3]float64{}
	for _, l := range mi.Lines {
		labels := []string{l.Tenant, l.Tier, mi.Report.Currency}
		amounts := [3]float64{l.Cost, l.WasteCost, l.OverheadCost}
		before := prev[l.AllocationID]
		for i, c := range []*prometheus.CounterVec{m.cost, m.waste, m.overhead} {
			// Counters only grow: a recomputation that lowers an amount is in the stored minutes.
			if d := amounts[i] - before[i]; d > 0 {
				c.WithLabelValues(labels...).Add(d)
			}
			amounts[i] = max(amounts[i], before[i])
		}
		now[l.AllocationID] = amounts
		// Breach counters start at 0 for every tenant seen, so that increase() sees the first breach.
		m.breaches.WithLabelValues(l.Tenant, l.Tier)
		if _, ok := m.book.JitterP99[l.Tier]; ok {
			m.jitterOver.WithLabelValues(l.Tenant, l.Tier)
		}
		if limit, ok := m.book.JitterP99[l.Tier]; ok && fresh && l.JitterP99 != nil && *l.JitterP99 > limit {
			m.jitterOver.WithLabelValues(l.Tenant, l.Tier).Inc()
		}
		if l.ColdStart != nil {
			if _, seen := m.coldSeen[l.AllocationID]; !seen {
				m.coldStart.WithLabelValues(l.Tier).Observe(l.ColdStart.Seconds())
				if *l.ColdStart > l.ColdStartSLA {
					m.breaches.WithLabelValues(l.Tenant, l.Tier).Inc()
				}
			}
			m.coldSeen[l.AllocationID] = mi.Start
		}
	}
	m.counted[mi.Start] = now
	// Forget what no recomputation will touch again, and cold starts of long-gone allocations.
	for t := range m.counted {
		if t.Before(mi.Start.Add(-6 * time.Hour)) {
			delete(m.counted, t)
			delete(m.unpricedCounted, t)
		}
	}
	for id, t := range m.coldSeen {
		if t.Before(mi.Start.Add(-48 * time.Hour)) {
			delete(m.coldSeen, id)
		}
	}
}

// countUnpriced adds what the minute attributed as unpriced, less what it held when counted
// before (a recomputed minute adds only its increases).
func (m *slaMetrics) countUnpriced(mi stored.Minute) {
	prev := m.unpricedCounted[mi.Start]
	now := map[[2]string]float64{}
	for _, u := range mi.Report.Unpriced {
		k := [2]string{u.Kind, u.Name}
		v := u.Seconds()
		if d := v - prev[k]; d > 0 {
			m.unpriced.WithLabelValues(k[0], k[1]).Add(d)
		}
		now[k] = max(v, prev[k])
	}
	for k, v := range prev {
		now[k] = max(v, now[k])
	}
	m.unpricedCounted[mi.Start] = now
}

func (m *slaMetrics) countViolations(errs []error) {
	for _, err := range errs {
		var ie *billing.InvariantError
		if errors.As(err, &ie) {
			m.violations.WithLabelValues(ie.Invariant).Inc()
		}
	}
}

func (m *slaMetrics) set(rep report.Report) {
	m.mu.Lock()
	m.latest = &rep
	m.mu.Unlock()
	m.lastOK.Set(float64(rep.WindowEnd.Unix()))
}

func (m *slaMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCost, descListCost, descWaste, descOverhead, descEfficiency, descJitter, descColdStart, descBreaches, descUnmetered, descUnallocated, descJitterLimit, descColdLimit} {
		ch <- d
	}
}

func (m *slaMetrics) Collect(ch chan<- prometheus.Metric) {
	if m.book != nil {
		for tier := range m.book.Tiers {
			ch <- prometheus.MustNewConstMetric(descColdLimit, prometheus.GaugeValue, m.book.ColdStartSLA(tier).Seconds(), tier)
			if d, ok := m.book.JitterP99[tier]; ok {
				ch <- prometheus.MustNewConstMetric(descJitterLimit, prometheus.GaugeValue, d.Seconds(), tier)
			}
		}
	}
	m.mu.RLock()
	rep := m.latest
	m.mu.RUnlock()
	if rep == nil {
		return
	}
	for _, r := range rep.Tenants {
		l := []string{r.Tenant, r.Tier, r.Currency}
		ch <- prometheus.MustNewConstMetric(descCost, prometheus.GaugeValue, r.Cost, l...)
		ch <- prometheus.MustNewConstMetric(descListCost, prometheus.GaugeValue, r.ListCost, l...)
		ch <- prometheus.MustNewConstMetric(descWaste, prometheus.GaugeValue, r.WasteCost, l...)
		ch <- prometheus.MustNewConstMetric(descOverhead, prometheus.GaugeValue, r.OverheadCost, l...)
		ch <- prometheus.MustNewConstMetric(descBreaches, prometheus.GaugeValue, float64(r.ColdStartBreaches), l...)
		ch <- prometheus.MustNewConstMetric(descUnmetered, prometheus.GaugeValue, r.Unmetered.Seconds(), l...)
		if r.Efficiency != nil {
			ch <- prometheus.MustNewConstMetric(descEfficiency, prometheus.GaugeValue, *r.Efficiency, l...)
		}
		if r.JitterP99 != nil {
			ch <- prometheus.MustNewConstMetric(descJitter, prometheus.GaugeValue, r.JitterP99.Seconds(), l...)
		}
		if r.ColdStartMax != nil {
			ch <- prometheus.MustNewConstMetric(descColdStart, prometheus.GaugeValue, r.ColdStartMax.Seconds(), l...)
		}
	}
	ch <- prometheus.MustNewConstMetric(descUnallocated, prometheus.GaugeValue, rep.UnallocatedListCost, rep.Currency)
}
