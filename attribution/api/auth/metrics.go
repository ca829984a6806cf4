package auth

import "github.com/prometheus/client_golang/prometheus"

// Reasons a credential is refused (slicemeter_api_auth_refused_total).
const (
	reasonNoToken   = "no_token"      // no Authorization header
	reasonMalformed = "malformed"     // not Bearer TOKEN
	reasonUnknown   = "unknown_token" // no entry's lookup key matches: refused without bcrypt
	reasonWrong     = "wrong_token"   // compared with bcrypt, and no entry matched
	reasonBadJWT    = "bad_jwt"       // a JWT refused (signature, claims, expiry)
)

type metrics struct {
	refusedVec *prometheus.CounterVec
	limited    prometheus.Counter
	bcrypt     prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		refusedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_api_auth_refused_total",
			Help: "API credentials refused (401), by reason: no_token, malformed, unknown_token (no entry's lookup key matches: no bcrypt), wrong_token (compared with bcrypt: an entry of the same lookup key, or entries without one), bad_jwt.",
		}, []string{"reason"}),
		limited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_api_auth_rate_limited_total",
			Help: "API requests refused with 429 because their address sent too many wrong tokens.",
		}),
		bcrypt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_api_auth_bcrypt_checks_total",
			Help: "bcrypt comparisons made to check static API tokens (a token proven once is cached).",
		}),
	}
	for _, r := range []string{reasonNoToken, reasonMalformed, reasonUnknown, reasonWrong, reasonBadJWT} {
		m.refusedVec.WithLabelValues(r)
	}
	return m
}

func (m *metrics) refused(reason string) { m.refusedVec.WithLabelValues(reason).Inc() }

// Register adds the authenticator's metrics to reg.
func (a *Authenticator) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{a.metrics.refusedVec, a.metrics.limited, a.metrics.bcrypt} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
