package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/attribution/continuous"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/internal/chconn"
)

type attributionCmd struct {
	dsn      *string
	cluster  *string
	book     *pricebookFlags
	interval *time.Duration
	window   *time.Duration
	cfg      continuous.Config
	samples  *string
	web      *web.FlagConfig
}

func newAttributionCmd(app *kingpin.Application) *attributionCmd {
	c := app.Command("attribution", "Attribute every closed minute continuously into ClickHouse, serve the SLA metrics on /metrics and the API on /api/v1.")
	cmd := &attributionCmd{
		dsn:      dsnFlag(c),
		cluster:  clusterFlag(c),
		book:     addPricebookFlags(c),
		interval: c.Flag("attribution.interval", "How often closed minutes are attributed (and the trailing window's gauges refreshed).").Default("1m").Duration(),
		window:   c.Flag("attribution.window", "Length of the trailing window that the slicemeter_tenant_* gauges describe (jitter p99 slides with it).").Default("1h").Duration(),
		// The per-second rollup: a minute of 1000 instances in about 1 s where raw 10 Hz samples
		// take 2.5 s (BenchmarkMinute), exact for allocations on whole seconds.
		samples: samplesFlag(c, "rollup-1s"),
		web:     kingpinflag.AddFlags(c, ":9837"),
	}
	c.Flag("attribution.delay", "A minute is attributed this long after it ends (samples arrive late through Kafka).").Default("30s").DurationVar(&cmd.cfg.Delay)
	c.Flag("attribution.lookback", "Every pass attributes again the closed minutes this far back, so late samples count.").Default("10m").DurationVar(&cmd.cfg.Lookback)
	c.Flag("attribution.backfill", "With no minute stored yet, start this far back.").Default("1h").DurationVar(&cmd.cfg.Backfill)
	c.Flag("attribution.max-recompute", "How far back an allocation that arrives late makes the service recompute.").Default("744h").DurationVar(&cmd.cfg.MaxRecompute)
	c.Flag("attribution.presence", "A stored minute counts as capacity every GPU sampled within this long before its end, so exporter "+
		"outages shorter than it do not shrink the fleet's capacity (and the unallocated row); whole minutes, 0: only GPUs sampled in the minute.").
		Default("1h").DurationVar(&cmd.cfg.Presence)
	c.Flag("attribution.max-minutes", "At most this many minutes per pass (the rest follow in the next passes).").Default("120").IntVar(&cmd.cfg.MaxMinutes)
	return cmd
}

func (c *attributionCmd) run(ctx context.Context, logger *slog.Logger) error {
	if *c.interval <= 0 || *c.window <= 0 || c.cfg.Lookback < 0 || c.cfg.Delay < 0 || c.cfg.Backfill < 0 || c.cfg.MaxMinutes <= 0 || c.cfg.Presence < 0 || c.cfg.Presence%time.Minute != 0 {
		return usage.Errorf("--attribution.interval, --attribution.window and --attribution.max-minutes must be > 0; delay, lookback, backfill and presence ≥ 0, presence in whole minutes")
	}
	book, err := c.book.load()
	if err != nil {
		return err
	}
	c.cfg.Samples = sampleSource(*c.samples)
	conn, err := chconn.Open(ctx, *c.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := requireClusterSettings(ctx, conn, *c.cluster); err != nil {
		return err
	}
	// A model the fleet has and the price book lacks would fail every pass: refuse to start.
	if err := checkFleetPriced(ctx, conn, book, max(*c.window, c.cfg.Backfill, 24*time.Hour)); err != nil {
		return err
	}
	reg := webserver.NewRegistry()
	sla := newSLAMetrics(reg, book)
	runner := continuous.NewRunner(conn, book, c.cfg, sla, logger)
	sla.watchLag(reg, runner)
	srv := &api.Server{
		Store: allocations.NewStore(conn),
		Report: func(ctx context.Context, q api.ReportQuery) (report.Report, error) {
			rep, err := computeWindow(ctx, conn, q.From, q.To, book, *c.samples, q.FromMinutes)
			if err != nil || !q.Neighbours {
				return rep, err
			}
			top, err := attribution.NoisyNeighbours(ctx, conn, q.From, q.To)
			return attribution.WithNeighbours(rep, top), err
		},
		Auth:    api.AllowAll{}, // the seam for authentication: a tenant principal sees only its own rows
		Metrics: allocations.NewMetrics(reg),
		Tiers:   book.Tiers,
		Logger:  logger,
	}
	var ready atomic.Bool
	webErr := webserver.Serve(ctx, webserver.Options{Flags: c.web, Registry: reg, Ready: &ready, Logger: logger, Routes: []func(*http.ServeMux){srv.Register}})
	tick := time.NewTicker(*c.interval)
	defer tick.Stop()
	for {
		c.pass(ctx, conn, book, runner, sla, &ready, logger)
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-webErr:
			if ok && err != nil {
				return fmt.Errorf("serving /metrics: %w", err)
			}
			webErr = nil
		case <-tick.C:
		}
	}
}

// pass attributes the closed minutes into ClickHouse, then the trailing window for the gauges.
func (c *attributionCmd) pass(ctx context.Context, conn driver.Conn, book *pricebook.PriceBook, runner *continuous.Runner, sla *slaMetrics, ready *atomic.Bool, logger *slog.Logger) {
	began := time.Now()
	p, err := runner.Once(ctx)
	sla.passDuration.Observe(time.Since(began).Seconds())
	if err != nil {
		sla.errors.Inc()
		logger.Error("attributing minutes failed", "from", p.From, "to", p.To, "err", err)
	} else if p.Fresh+p.Recomputed > 0 {
		logger.Debug("attributed minutes", "from", p.From, "to", p.To, "fresh", p.Fresh, "recomputed", p.Recomputed)
	}
	// Whole seconds: the window's edges are what the report prints.
	to := time.Now().UTC().Truncate(time.Second)
	began = time.Now()
	rep, err := attribution.ComputeFrom(ctx, conn, to.Add(-*c.window), to, book, c.cfg.Samples)
	sla.duration.Observe(time.Since(began).Seconds())
	if err != nil {
		sla.errors.Inc()
		logger.Error("attribution failed", "window_end", to, "err", err)
		return
	}
	violations := attribution.CheckInvariants(rep)
	sla.countViolations(violations)
	for _, v := range violations {
		logger.Error("attribution invariant violated", "window_end", to, "err", v)
	}
	sla.set(rep)
	ready.Store(true)
}

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

	book *pricebook.PriceBook // the SLA limits per tier

	// counted is what the counters hold per minute and allocation, for the minutes a
	// recomputation may still touch: a recomputed minute adds only its increases.
	counted map[time.Time]map[string][3]float64
	// coldSeen are the allocations whose cold start was observed (once each), by last minute seen.
	coldSeen map[string]time.Time
}

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
		book:     book,
		counted:  map[time.Time]map[string][3]float64{},
		coldSeen: map[string]time.Time{},
	}
	m.minutes.WithLabelValues("fresh")
	m.minutes.WithLabelValues("recomputed")
	for _, inv := range []string{attribution.InvariantCapacity, attribution.InvariantCostSplit, attribution.InvariantEfficiency, attribution.InvariantMetered, attribution.InvariantOverlap} {
		m.violations.WithLabelValues(inv)
	}
	reg.MustRegister(m, m.duration, m.errors, m.lastOK, m.passDuration, m.minutes, m.cost, m.waste, m.overhead, m.coldStart, m.breaches, m.jitterOver, m.violations)
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

// Minute implements continuous.Observer: the counters grow by what each minute adds.
func (m *slaMetrics) Minute(mi continuous.Minute, fresh bool, violations []error) {
	m.countViolations(violations)
	kind := "fresh"
	if !fresh {
		kind = "recomputed"
	}
	m.minutes.WithLabelValues(kind).Inc()
	prev, tracked := m.counted[mi.Start]
	if !fresh && !tracked {
		// Recomputed before this process counted it (a restart): counting it would count it twice.
		return
	}
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
		}
	}
	for id, t := range m.coldSeen {
		if t.Before(mi.Start.Add(-48 * time.Hour)) {
			delete(m.coldSeen, id)
		}
	}
}

func (m *slaMetrics) countViolations(errs []error) {
	for _, err := range errs {
		var ie *attribution.InvariantError
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
