package allocations

import "github.com/prometheus/client_golang/prometheus"

// Metrics count what the store and the API accepted, refused and flagged.
type Metrics struct {
	stored    prometheus.Counter
	unchanged prometheus.Counter
	refused   *prometheus.CounterVec
	unseen    prometheus.Counter
}

// Refusal reasons, the values of the reason label.
const (
	ReasonMalformed = "malformed" // not decodable or invalid (400)
	ReasonConflict  = "conflict"  // overlaps or ids twice (409)
	ReasonForbidden = "forbidden" // another tenant's allocation (403)
)

// NewMetrics registers the allocation counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		stored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_allocations_stored_total", Help: "Allocations stored (new or changed) through the HTTP API or an import.",
		}),
		unchanged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_allocations_unchanged_total", Help: "Allocations received again with nothing changed (idempotent repeats).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_allocations_refused_total", Help: "Allocations refused, by reason (malformed, conflict, forbidden).",
		}, []string{"reason"}),
		unseen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_allocations_unseen_target_total", Help: "Allocations accepted for an instance that no sample has mentioned yet.",
		}),
	}
	for _, r := range []string{ReasonMalformed, ReasonConflict, ReasonForbidden} {
		m.refused.WithLabelValues(r)
	}
	reg.MustRegister(m.stored, m.unchanged, m.refused, m.unseen)
	return m
}

// Done counts a Put's result.
func (m *Metrics) Done(r Result) {
	if m == nil {
		return
	}
	m.stored.Add(float64(len(r.Stored)))
	m.unchanged.Add(float64(len(r.Unchanged)))
	m.unseen.Add(float64(len(r.Unseen)))
}

// Refused counts n allocations refused for reason.
func (m *Metrics) Refused(reason string, n int) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(reason).Add(float64(max(n, 1)))
}
