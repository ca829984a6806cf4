package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is one [Start, End) of a stepped report.
type Window struct{ Start, End time.Time }

// ParseWindow parses a window's RFC 3339 edges, named fromName and toName in errors: the
// report command's --from and --to.
func ParseWindow(fromName, from, toName, to string) (start, end time.Time, err error) {
	for _, e := range []struct {
		name, value string
		dst         *time.Time
	}{{fromName, from, &start}, {toName, to, &end}} {
		t, err := time.Parse(time.RFC3339Nano, e.value)
		if err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("%s %q: expected an RFC 3339 time such as 2026-01-05T00:00:00Z", e.name, e.value)
		}
		*e.dst = t.UTC()
	}
	if !end.After(start) {
		return time.Time{}, time.Time{}, fmt.Errorf("%s (%s) must be after %s (%s)", toName, to, fromName, from)
	}
	return start, end, nil
}

// Windows is WindowsIn with calendar months in UTC.
func Windows(from, to time.Time, step string) ([]Window, error) {
	return WindowsIn(from, to, step, time.UTC)
}

// WindowsIn cuts [from, to) into consecutive windows of one step, starting at from; the last
// window ends at to. step is empty (one window), a Go duration ("1h", "15m"), a number of
// days ("1d", "7d") or "month": calendar months in loc (the price book's time zone), each
// window ending at the next local midnight of a month's first day, so that a month in
// Europe/Berlin is 743 h in March and 745 h in October; a from inside a month gives a first
// window to that month's end.
func WindowsIn(from, to time.Time, step string, loc *time.Location) ([]Window, error) {
	if !from.Before(to) {
		return nil, fmt.Errorf("window [%s, %s): the start must be before the end", from, to)
	}
	if loc == nil {
		loc = time.UTC
	}
	next, err := stepper(step, loc)
	if err != nil {
		return nil, err
	}
	var out []Window
	for start, i := from.UTC(), 1; start.Before(to); i++ {
		end := next(from.UTC(), i)
		if end.After(to) || step == "" {
			end = to
		}
		out = append(out, Window{start, end})
		start = end
	}
	return out, nil
}

// MonthStart is the start of the calendar month of t in loc, shifted by months (0: t's own
// month, 1: the next), in UTC.
func MonthStart(t time.Time, loc *time.Location, months int) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month()+time.Month(months), 1, 0, 0, 0, 0, loc).UTC()
}

// stepper returns the end of the i-th window (1-based) counted from from.
func stepper(step string, loc *time.Location) (func(from time.Time, i int) time.Time, error) {
	bad := fmt.Errorf("step %q: expected 1h, 1d, month or another duration such as 15m or 7d", step)
	switch {
	case step == "":
		return func(from time.Time, _ int) time.Time { return from }, nil
	case step == "month":
		return func(from time.Time, i int) time.Time { return MonthStart(from, loc, i) }, nil
	case strings.HasSuffix(step, "d"):
		days, err := strconv.Atoi(strings.TrimSuffix(step, "d"))
		if err != nil || days <= 0 {
			return nil, bad
		}
		return func(from time.Time, i int) time.Time { return from.AddDate(0, 0, i*days) }, nil
	default:
		d, err := time.ParseDuration(step)
		if err != nil || d < time.Second {
			return nil, bad
		}
		return func(from time.Time, i int) time.Time { return from.Add(time.Duration(i) * d) }, nil
	}
}
