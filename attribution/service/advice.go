package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// adviceEvery is how often the advice gauges are computed: a week's advice moves slowly, and
// computing it reads a week of samples_1m.
const adviceEvery = time.Hour

// adviceRetryEmpty is how soon an advice that found nothing billed is computed again: on a
// fresh install the first pass runs before any allocation is billed, and an hour of no gauges
// would hide the fleet's first advice.
const adviceRetryEmpty = 30 * time.Second

// nextAdvice is when the advice computed at now is computed again.
func nextAdvice(now time.Time, res advice.Result) time.Time {
	if len(res.Rows) == 0 {
		return now.Add(adviceRetryEmpty)
	}
	return now.Add(adviceEvery)
}

// adviceMetrics serve right-sizing advice over the last advice.DefaultWindow as gauges: each
// tenant's savings over 30 days and the GPU-equivalents right-sizing frees per GPU model
// (model="__fleet__": the whole fleet), for the economics dashboard.
type adviceMetrics struct {
	mu      sync.RWMutex
	savings map[string]float64 // tenant → savings_30d
	freed   map[string]float64 // model → GPU-equivalents
	curr    string
	next    time.Time // when to compute again
	errors  prometheus.Counter
}

var (
	descAdviceSavings = prometheus.NewDesc("slicemeter_advice_savings_30d",
		"What right-sizing the tenant's allocations as `slicemeter advise` advises would save over 30 days, at the last 7 days' use, in the price book's currency.",
		[]string{"tenant", "currency"}, nil)
	descAdviceFreed = prometheus.NewDesc("slicemeter_advice_gpu_equivalents_freed",
		"GPU-equivalents (Σ billed fraction × billed time / window) that right-sizing the last 7 days' allocations would free, per GPU model (model=\"__fleet__\": the whole fleet).",
		modelLabels, nil)
)

func newAdviceMetrics(reg prometheus.Registerer) *adviceMetrics {
	m := &adviceMetrics{errors: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "slicemeter_advice_errors_total", Help: "Computations of the advice gauges that failed.",
	})}
	reg.MustRegister(m, m.errors)
	return m
}

// update computes the advice of the last 7 days to now (of the nodes owns accepts; nil: all)
// once adviceEvery has passed since the last success.
func (m *adviceMetrics) update(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, now time.Time, owns func(string) bool) error {
	m.mu.RLock()
	due := !now.Before(m.next)
	m.mu.RUnlock()
	if !due {
		return nil
	}
	res, err := advice.Compute(ctx, conn, book, advice.Options{From: now.Add(-advice.DefaultWindow), To: now, Samples: store.MinuteRollup,
		Headroom: advice.DefaultHeadroom, MinMeasured: advice.DefaultMinMeasured, Nodes: owns})
	if err != nil {
		m.errors.Inc()
		return err
	}
	m.set(res, nextAdvice(now, res))
	return nil
}

// adviseLoop keeps the advice gauges of the replica's nodes (those it attributes) up to date,
// checking every interval whether the advice is due (adviceEvery; adviceRetryEmpty while it
// found nothing), apart from the passes.
func (s *service) adviseLoop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if nodes, owned := s.runner.Nodes(); owned {
			if err := s.advice.update(ctx, s.conn, s.cfg.Book, s.now().UTC().Truncate(time.Minute), nodes); err != nil && ctx.Err() == nil {
				s.logs.Log(ctx, time.Now(), slog.LevelError, "advice", "computing the advice gauges failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// set serves the advice's figures until next.
func (m *adviceMetrics) set(res advice.Result, next time.Time) {
	savings := map[string]float64{}
	for tenant, d := range res.SavingsByTenant() {
		savings[tenant] = d.InexactFloat64()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.savings, m.freed, m.curr, m.next = savings, res.FreedByModel(), res.Currency, next
}

func (m *adviceMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAdviceSavings
	ch <- descAdviceFreed
}

func (m *adviceMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for tenant, v := range m.savings {
		ch <- prometheus.MustNewConstMetric(descAdviceSavings, prometheus.GaugeValue, v, tenant, m.curr)
	}
	for model, v := range m.freed {
		ch <- prometheus.MustNewConstMetric(descAdviceFreed, prometheus.GaugeValue, v, model)
	}
}
