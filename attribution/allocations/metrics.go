package allocations

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Metrics count what the store and the API accepted, refused and flagged.
type Metrics struct {
	stored    prometheus.Counter
	unchanged prometheus.Counter
	refused   *prometheus.CounterVec
	unseen    prometheus.Counter
}

// Refusal reasons, the values of the reason label, beside the validator's own
// (validate.AllocationReasons: invalid, missing_tenant, ...), counted as the collector counts them.
const (
	ReasonMalformed = "malformed" // not decodable as allocations, or a body too large (400, 413)
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
			Name: "slicemeter_allocations_refused_total",
			Help: "Allocations refused, by reason: the validator's (invalid, missing_tenant, ...), malformed (not decodable), conflict or forbidden.",
		}, []string{"reason"}),
		unseen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_allocations_unseen_target_total", Help: "Allocations accepted for an instance that no sample has mentioned yet.",
		}),
	}
	// Every reason at 0 from the start, so that increase() sees the first refusal.
	for _, r := range append([]string{ReasonMalformed, ReasonConflict, ReasonForbidden}, validate.AllocationReasons()...) {
		m.refused.WithLabelValues(r)
	}
	reg.MustRegister(m.stored, m.unchanged, m.refused, m.unseen)
	return m
}

// ReasonOf is the reason label of a decoding error: the validator's reason when the validator
// refused an allocation (a reserved tenant: invalid), else malformed.
func ReasonOf(err error) string {
	var e *allocation.Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	return ReasonMalformed
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
