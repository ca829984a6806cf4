package service

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// fleetMetrics serve the fleet report of the trailing window (by model, and the whole fleet as
// model="__fleet__") and the tenants per host as gauges, for the "fleet" alerts and the Fleet
// economics dashboard.
type fleetMetrics struct {
	mu      sync.RWMutex
	rows    []fleet.Row
	perHost map[string]int
	limit   int
	errors  prometheus.Counter
}

var (
	modelLabels         = []string{"model"}
	descAllocationRatio = prometheus.NewDesc("slicemeter_fleet_allocation_ratio", "Allocated / capacity GPU-hours in the trailing window, per GPU model (model=\"__fleet__\": the whole fleet).", modelLabels, nil)
	descActiveRatio     = prometheus.NewDesc("slicemeter_fleet_active_ratio", "Active (busy SMs, in whole-GPU units) / capacity GPU-hours in the trailing window.", modelLabels, nil)
	descMemEfficiency   = prometheus.NewDesc("slicemeter_fleet_memory_efficiency_ratio", "Time-weighted memory used / memory of the instance over every instance's samples in the trailing window.", modelLabels, nil)
	descOverheadRatio   = prometheus.NewDesc("slicemeter_fleet_overhead_ratio", "Overhead cost / revenue in the trailing window (the seeds' target: under 3 %).", modelLabels, nil)
	descMargin          = prometheus.NewDesc("slicemeter_fleet_margin", "Revenue − operator cost (price book costs) in the trailing window, in the price book's currency; no series without costs.", []string{"model", "currency"}, nil)
	descRevenue         = prometheus.NewDesc("slicemeter_fleet_revenue", "Σ tenants' cost in the trailing window.", []string{"model", "currency"}, nil)
	descFragmented      = prometheus.NewDesc("slicemeter_fleet_fragmented_slices", "MIG compute slices free in the trailing window that the largest profile held on the model cannot use.", modelLabels, nil)
	descEnergy          = prometheus.NewDesc("slicemeter_fleet_energy_kwh", "GPU energy in the trailing window, kWh.", modelLabels, nil)
	descTenantsPerHost  = prometheus.NewDesc("slicemeter_fleet_tenants_per_host", "The most tenants billed on the node within one minute of the trailing window (the blast radius of its failure).", []string{"node"}, nil)
	descTenantLimit     = prometheus.NewDesc("slicemeter_fleet_tenants_per_host_limit", "--fleet.max-tenants-per-host: the most tenants one host should carry.", nil, nil)
)

func newFleetMetrics(reg prometheus.Registerer, limit int) *fleetMetrics {
	m := &fleetMetrics{limit: limit, perHost: map[string]int{}, errors: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "slicemeter_fleet_errors_total", Help: "Fleet reports of the trailing window that could not be computed.",
	})}
	reg.MustRegister(m, m.errors)
	return m
}

// update computes the fleet report of the window (whole minutes) and serves it. A window
// with minutes not attributed (the service's first hour, a minute that failed) is cut to its
// minutes after the last of them: the gauges never count capacity whose revenue is missing.
func (m *fleetMetrics) update(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, from, to time.Time, presence time.Duration) error {
	in, err := fleet.Read(ctx, conn, from, to, presence)
	var notYet *stored.NotAttributedError
	if errors.As(err, &notYet) {
		if after := notYet.Last.Add(time.Minute); after.Before(to) {
			in, err = fleet.Read(ctx, conn, after, to, presence)
		}
	}
	if err != nil {
		m.errors.Inc()
		return err
	}
	rows := fleet.Build(in, book, fleet.ByModel, m.limit)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows, m.perHost = rows, in.TenantsPerHost
	return nil
}

func (m *fleetMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAllocationRatio, descActiveRatio, descMemEfficiency, descOverheadRatio, descMargin,
		descRevenue, descFragmented, descEnergy, descTenantsPerHost, descTenantLimit} {
		ch <- d
	}
}

func (m *fleetMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ch <- prometheus.MustNewConstMetric(descTenantLimit, prometheus.GaugeValue, float64(m.limit))
	for node, n := range m.perHost {
		ch <- prometheus.MustNewConstMetric(descTenantsPerHost, prometheus.GaugeValue, float64(n), node)
	}
	for _, r := range m.rows {
		gauge := func(d *prometheus.Desc, v *float64, labels ...string) {
			if v != nil {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, *v, append([]string{r.Group}, labels...)...)
			}
		}
		gauge(descAllocationRatio, r.AllocationRatio)
		gauge(descActiveRatio, r.ActiveRatio)
		gauge(descMemEfficiency, r.MemoryEfficiency)
		gauge(descOverheadRatio, r.OverheadRatio)
		gauge(descMargin, r.Margin, r.Currency)
		gauge(descRevenue, &r.Revenue, r.Currency)
		fragmented, energy := float64(r.FragmentedSlices), r.EnergyKWh
		gauge(descFragmented, &fragmented)
		gauge(descEnergy, &energy)
	}
}
