package request

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/advice"
)

// TestParseAdvice: the defaults (the 7 days to now, 20 % and 10 % headroom, 1 h measured,
// by allocation, CSV), each parameter, and a refusal naming the parameter for each bad one.
func TestParseAdvice(t *testing.T) {
	now := time.Date(2026, 3, 9, 12, 30, 0, 0, time.UTC)
	a, err := ParseAdvice(url.Values{}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := advice.Options{From: now.Add(-7 * 24 * time.Hour), To: now, Headroom: advice.Headroom{Compute: 0.2, Memory: 0.1}, MinMeasured: time.Hour}
	if a.Options.From != want.From || a.Options.To != want.To || a.Options.Headroom != want.Headroom || a.Options.MinMeasured != want.MinMeasured ||
		a.By != advice.ByAllocation || a.Format != advice.CSV {
		t.Errorf("defaults %+v, want %+v by allocation as CSV", a, want)
	}
	a, err = ParseAdvice(url.Values{"from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-02T00:00:00Z"}, "by": {"model"}, "format": {"json"},
		"compute_headroom": {"0.5"}, "memory_headroom": {"0"}, "min_measured": {"10m"}}, now)
	if err != nil || a.Options.To.Sub(a.Options.From) != 24*time.Hour || a.By != advice.ByModel || a.Format != advice.JSON ||
		a.Options.Headroom != (advice.Headroom{Compute: 0.5}) || a.Options.MinMeasured != 10*time.Minute {
		t.Errorf("parsed %+v, %v", a, err)
	}
	// Dates are midnight UTC, as the reports' --from/--to.
	if a, err = ParseAdvice(url.Values{"from": {"2026-03-01"}, "to": {"2026-03-08"}}, now); err != nil ||
		!a.Options.From.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) || a.Options.To.Sub(a.Options.From) != 7*24*time.Hour {
		t.Errorf("dates parsed %+v, %v", a.Options, err)
	}
	for _, tc := range []struct {
		query, param string
	}{
		{"from=yesterday", "from"}, {"to=2026-03-01T00:00:00Z&from=2026-03-02T00:00:00Z", "to"}, {"from=2025-01-01T00:00:00Z", "from"},
		{"by=rack", "by"}, {"format=xml", "format"}, {"compute_headroom=-0.1", "compute_headroom"}, {"memory_headroom=NaN", "memory_headroom"},
		{"min_measured=soon", "min_measured"}, {"min_measured=-1h", "min_measured"}, {"to=1990-01-01T00:00:00Z", "to"},
	} {
		q, _ := url.ParseQuery(tc.query)
		_, err := ParseAdvice(q, now)
		var e *Error
		if !errors.As(err, &e) || e.Param != tc.param {
			t.Errorf("%s: %v; want an error naming %s", tc.query, err, tc.param)
		}
	}
}
