package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/internal/chconn"
)

type attributionCmd struct {
	dsn      *string
	book     *pricebookFlags
	interval *time.Duration
	window   *time.Duration
	web      *web.FlagConfig
}

func newAttributionCmd(app *kingpin.Application) *attributionCmd {
	c := app.Command("attribution", "Attribute the trailing window to tenants continuously and serve the SLA metrics on /metrics.")
	return &attributionCmd{
		dsn:      dsnFlag(c),
		book:     addPricebookFlags(c),
		interval: c.Flag("attribution.interval", "How often the window is attributed.").Default("1m").Duration(),
		window:   c.Flag("attribution.window", "Length of the trailing window that the metrics describe.").Default("1h").Duration(),
		web:      kingpinflag.AddFlags(c, ":9837"),
	}
}

func (c *attributionCmd) run(ctx context.Context, logger *slog.Logger) error {
	if *c.interval <= 0 || *c.window <= 0 {
		return usage("--attribution.interval and --attribution.window must be > 0")
	}
	book, err := c.book.load()
	if err != nil {
		return err
	}
	conn, err := chconn.Open(ctx, *c.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	reg := newRegistry()
	sla := newSLAMetrics(reg)
	var ready atomic.Bool
	webErr := serveWeb(ctx, c.web, reg, &ready, logger)
	tick := time.NewTicker(*c.interval)
	defer tick.Stop()
	for {
		// Whole seconds: the window's edges are what the report prints.
		to := time.Now().UTC().Truncate(time.Second)
		began := time.Now()
		rep, err := attribution.Compute(ctx, conn, to.Add(-*c.window), to, book)
		sla.duration.Observe(time.Since(began).Seconds())
		if err != nil {
			sla.errors.Inc()
			logger.Error("attribution failed", "window_end", to, "err", err)
		} else {
			sla.set(rep)
			ready.Store(true)
		}
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

// slaMetrics serve the latest report of the trailing window as per-tenant gauges.
type slaMetrics struct {
	mu       sync.RWMutex
	latest   *report.Report
	duration prometheus.Histogram
	errors   prometheus.Counter
	lastOK   prometheus.Gauge
}

var (
	tenantLabels    = []string{"tenant", "tier", "currency"}
	descCost        = prometheus.NewDesc("slicemeter_tenant_cost", "Cost of the tenant's allocations in the trailing window, in the price book's currency.", tenantLabels, nil)
	descListCost    = prometheus.NewDesc("slicemeter_tenant_list_cost", "List cost (before the tier multiplier) in the trailing window.", tenantLabels, nil)
	descWaste       = prometheus.NewDesc("slicemeter_tenant_waste_cost", "Cost of held but idle capacity in the trailing window.", tenantLabels, nil)
	descOverhead    = prometheus.NewDesc("slicemeter_tenant_overhead_cost", "Cost eaten by virtualization (MIG SM loss, vGPU switching) in the trailing window.", tenantLabels, nil)
	descEfficiency  = prometheus.NewDesc("slicemeter_tenant_efficiency_ratio", "Metered-time-weighted efficiency of the tenant's allocations.", tenantLabels, nil)
	descJitter      = prometheus.NewDesc("slicemeter_tenant_jitter_p99_seconds", "Nearest-rank p99 of the waits between the tenant's vGPU run slices.", tenantLabels, nil)
	descColdStart   = prometheus.NewDesc("slicemeter_tenant_cold_start_max_seconds", "Longest cold start of the tenant's allocations in the trailing window.", tenantLabels, nil)
	descBreaches    = prometheus.NewDesc("slicemeter_tenant_cold_start_breaches", "Allocations in the trailing window whose cold start exceeded the tier's SLA.", tenantLabels, nil)
	descUnmetered   = prometheus.NewDesc("slicemeter_tenant_unmetered_seconds", "Billed time without samples (exporter outages) in the trailing window.", tenantLabels, nil)
	descUnallocated = prometheus.NewDesc("slicemeter_unallocated_list_cost", "Fleet capacity list cost that no tenant held in the trailing window.", []string{"currency"}, nil)
)

func newSLAMetrics(reg prometheus.Registerer) *slaMetrics {
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
	}
	reg.MustRegister(m, m.duration, m.errors, m.lastOK)
	return m
}

func (m *slaMetrics) set(rep report.Report) {
	m.mu.Lock()
	m.latest = &rep
	m.mu.Unlock()
	m.lastOK.Set(float64(rep.WindowEnd.Unix()))
}

func (m *slaMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCost, descListCost, descWaste, descOverhead, descEfficiency, descJitter, descColdStart, descBreaches, descUnmetered, descUnallocated} {
		ch <- d
	}
}

func (m *slaMetrics) Collect(ch chan<- prometheus.Metric) {
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
