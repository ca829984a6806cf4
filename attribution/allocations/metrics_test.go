package allocations

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slicemeter/slicemeter/schemas/validate"
)

// TestRefusalReasons: a decoding error is counted under the validator's reason when the
// validator refused an allocation (as the collector counts it), malformed when the input is
// not allocations at all; every reason's series exists at 0 from the start.
func TestRefusalReasons(t *testing.T) {
	const good = `{"allocation_id": "a1", "tenant": "acme", "tier": "pro", "node": "node-a", "instance_id": "gpu0",
  "requested_at": "2026-01-05T00:00:00Z", "started_at": "2026-01-05T00:00:12Z", "ended_at": "2026-01-05T01:00:00Z"}`
	tiers := map[string]float64{"pro": 1}
	for _, tc := range []struct {
		name, input, reason string
	}{
		{"not JSON", "[{", ReasonMalformed},
		{"a number for the tenant", `[{"tenant": 1}]`, ReasonMalformed},
		{"unknown field", `[{"colour": "red"}]`, ReasonMalformed},
		{"a time that is not RFC 3339", strings.Replace(good, "2026-01-05T00:00:12Z", "noon", 1), ReasonMalformed},
		{"reserved tenant", strings.Replace(good, `"acme"`, `"__unallocated__"`, 1), validate.ReasonInvalid},
		{"formula tenant", strings.Replace(good, `"acme"`, `"=1+1"`, 1), validate.ReasonInvalid},
		{"no tenant", strings.Replace(good, `"acme"`, `""`, 1), validate.ReasonMissingTenant},
		{"no node", strings.Replace(good, `"node-a"`, `""`, 1), validate.ReasonMissingNode},
		{"unknown tier", strings.Replace(good, `"pro"`, `"gold"`, 1), validate.ReasonInvalid},
		{"no started_at", strings.Replace(good, `"2026-01-05T00:00:12Z"`, `""`, 1), validate.ReasonInvalid},
		{"started in 1999", strings.Replace(strings.Replace(good, "2026-01-05T00:00:00Z", "1999-01-05T00:00:00Z", 1), "2026-01-05T00:00:12Z", "1999-01-05T00:00:12Z", 1), validate.ReasonInvalid},
		{"started before requested", strings.Replace(good, "2026-01-05T00:00:12Z", "2026-01-04T00:00:00Z", 1), validate.ReasonStartedBeforeRequest},
		{"ended at start", strings.Replace(good, "2026-01-05T01:00:00Z", "2026-01-05T00:00:12Z", 1), validate.ReasonEndedNotAfterStarted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeLines("request", []byte("["+strings.TrimPrefix(strings.TrimSuffix(tc.input, "]"), "[")+"]"), tiers)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := ReasonOf(err); got != tc.reason {
				t.Errorf("reason %s, want %s (%v)", got, tc.reason, err)
			}
		})
	}

	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	want := append([]string{ReasonMalformed, ReasonConflict, ReasonForbidden}, validate.AllocationReasons()...)
	if n := testutil.CollectAndCount(m.refused); n != len(want) {
		t.Errorf("%d refusal series at start, want %d (%v)", n, len(want), want)
	}
	for _, r := range want {
		if v := testutil.ToFloat64(m.refused.WithLabelValues(r)); v != 0 {
			t.Errorf("reason %s starts at %v", r, v)
		}
	}
	_, _, err := DecodeLines("request", []byte(`[`+strings.Replace(good, `"acme"`, `"__unallocated__"`, 1)+`]`), nil)
	m.Refused(ReasonOf(err), 1)
	if v := testutil.ToFloat64(m.refused.WithLabelValues(validate.ReasonInvalid)); v != 1 {
		t.Errorf("a reserved tenant counted %v under invalid, want 1", v)
	}
	if v := testutil.ToFloat64(m.refused.WithLabelValues(ReasonMalformed)); v != 0 {
		t.Errorf("a reserved tenant counted %v under malformed, want 0", v)
	}
}
