// Package period is the billing periods (attribution/README.md, "Billing periods"): a period is a calendar
// month in the price book's time zone. Closing one (Closer.Close) computes its tenant report
// through attribution.Report and stores it once, rendered, with its totals as Decimal
// (billing_periods, billing_period_lines): a closed period reads back byte-identical
// whatever arrives later. What arrives later for a closed period (a late sample, allocation or
// price change) is billed as correction lines in the next period closed: its recomputed
// report minus what the closed periods billed for it, per tenant and tier, so that the sum
// over all periods stays the bill of the data.
package period

import (
	"fmt"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Month is one billing period: a calendar month, in a time zone given where it matters.
type Month struct {
	Year  int
	Month time.Month
}

// Parse reads "YYYY-MM".
func Parse(s string) (Month, error) {
	t, err := time.Parse("2006-01", s)
	if err != nil || t.Format("2006-01") != s {
		return Month{}, fmt.Errorf("billing period %q: expected a month as YYYY-MM, e.g. 2026-11", s)
	}
	return Month{t.Year(), t.Month()}, nil
}

// CheckRange refuses a period not wholly inside 2000-01-01..2106-02-07 (with a day's margin
// for its time zone), as validate.CheckTime refuses a time: field names where it was given
// and value is the text as given.
func (m Month) CheckRange(field, value string) error {
	start := time.Date(m.Year, m.Month, 1, 0, 0, 0, 0, time.UTC)
	for _, t := range []time.Time{start.AddDate(0, 0, -1), start.AddDate(0, 1, 1)} {
		if r := validate.CheckTime(field, value, t); r != nil {
			r.Expected = "a month from " + validate.MinTimestamp.AddDate(0, 1, 0).Format("2006-01") + " to " + validate.MaxTime.AddDate(0, -1, 0).Format("2006-01") +
				" (" + r.Expected + ")"
			return r
		}
	}
	return nil
}

// Of is the period of t in loc.
func Of(t time.Time, loc *time.Location) Month {
	l := t.In(loc)
	return Month{l.Year(), l.Month()}
}

// String is "YYYY-MM".
func (m Month) String() string { return fmt.Sprintf("%04d-%02d", m.Year, int(m.Month)) }

// Add is the period months later (earlier when negative).
func (m Month) Add(months int) Month {
	t := time.Date(m.Year, m.Month+time.Month(months), 1, 0, 0, 0, 0, time.UTC)
	return Month{t.Year(), t.Month()}
}

// Before orders periods.
func (m Month) Before(o Month) bool {
	return m.Year < o.Year || m.Year == o.Year && m.Month < o.Month
}

// Bounds is the period's window [start, end) in UTC: from local midnight of its first day in
// loc to that of the next month's (daylight saving time included).
func (m Month) Bounds(loc *time.Location) (start, end time.Time) {
	first := time.Date(m.Year, m.Month, 1, 0, 0, 0, 0, loc)
	return first.UTC(), report.MonthStart(first, loc, 1)
}
