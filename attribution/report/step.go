package report

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Window is one [Start, End) of a stepped report.
type Window struct{ Start, End time.Time }

// ParseWindow parses a window's edges, named fromName and toName in errors: the --from and
// --to of the commands (report, fleet). An edge is an RFC 3339 time or a date (ParseTime).
// Each edge must lie in 2000-01-01..2106-02-07 (validate.CheckTime), checked on the parsed
// time before anything else uses it.
func ParseWindow(fromName, from, toName, to string) (start, end time.Time, err error) {
	for _, e := range []struct {
		name, value string
		dst         *time.Time
	}{{fromName, from, &start}, {toName, to, &end}} {
		t, err := ParseTime(e.value)
		if err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("%s %q: expected an RFC 3339 time such as 2026-01-05T00:00:00Z or a date such as 2026-01-05 (midnight UTC)", e.name, e.value)
		}
		if r := validate.CheckTime(e.name, strconv.Quote(e.value), t); r != nil {
			return time.Time{}, time.Time{}, r
		}
		*e.dst = t.UTC()
	}
	if !end.After(start) {
		return time.Time{}, time.Time{}, fmt.Errorf("%s (%s) must be after %s (%s)", toName, to, fromName, from)
	}
	return start, end, nil
}

// DateLayout is the date a window's edge may be given as: midnight UTC of that day.
const DateLayout = "2006-01-02"

// ParseTime parses a window's edge: an RFC 3339 time (2026-01-05T00:00:00Z, any offset, any
// fraction), or a date (2026-01-05), which is midnight UTC of that day, not of the price
// book's time zone: a day in UTC is what the CSV's times say.
func ParseTime(s string) (time.Time, error) {
	if len(s) == len(DateLayout) {
		return time.Parse(DateLayout, s)
	}
	return time.Parse(time.RFC3339Nano, s)
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
	n, err := CountWindows(from, to, step, loc)
	if err != nil {
		return nil, err
	}
	if n > MaxBuiltWindows {
		return nil, fmt.Errorf("step %q over [%s, %s): %d windows; expected at most %d", step,
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), n, MaxBuiltWindows)
	}
	next, _ := stepper(step, loc)
	out := make([]Window, 0, n)
	for start, i := from.UTC(), 1; start.Before(to); i++ {
		end := next(from.UTC(), i)
		if end.After(to) || step == "" || i == n {
			end = to // the n-th window is the last whatever the clock arithmetic says
		}
		out = append(out, Window{start, end})
		start = end
	}
	return out, nil
}

// MaxBuiltWindows bounds what WindowsIn builds whatever its caller checked (about 50 MB of
// windows; a CLI report of more is refused): a caller with a
// limit (the API's --api.max-report-windows) refuses far below it, using CountWindows.
const MaxBuiltWindows = 1 << 20

// CountWindows is len(WindowsIn(from, to, step, loc)), computed from the parameters alone
// (no window is built), so that a request's cost is known before any work proportional to it.
// A count beyond what an int holds is math.MaxInt.
func CountWindows(from, to time.Time, step string, loc *time.Location) (int, error) {
	if !from.Before(to) {
		return 0, fmt.Errorf("window [%s, %s): the start must be before the end", from, to)
	}
	if loc == nil {
		loc = time.UTC
	}
	if _, err := stepper(step, loc); err != nil {
		return 0, err
	}
	switch {
	case step == "":
		return 1, nil
	case step == "month":
		// Windows end at the local month starts after from's month: count them to the
		// start of to's own month, plus one for the part of that month before to.
		f, t := from.In(loc), to.In(loc)
		k := (t.Year()-f.Year())*12 + int(t.Month()) - int(f.Month())
		// A time zone's odd midnights cannot make the estimate off by more than one: settle
		// it on the windows' real edges.
		for k > 0 && !MonthStart(from, loc, k).Before(to) {
			k--
		}
		for MonthStart(from, loc, k+1).Before(to) {
			k++
		}
		return k + 1, nil
	case strings.HasSuffix(step, "d"):
		days, _ := strconv.Atoi(strings.TrimSuffix(step, "d"))
		return ceilDiv(from, to, time.Duration(days)*24*time.Hour), nil
	default:
		d, _ := time.ParseDuration(step)
		return ceilDiv(from, to, d), nil
	}
}

// ceilDiv is how many steps of d cover [from, to), exact for any two times (to.Sub(from)
// saturates beyond 292 years).
func ceilDiv(from, to time.Time, d time.Duration) int {
	span := big.NewInt(to.Unix() - from.Unix())
	span.Mul(span, big.NewInt(int64(time.Second)))
	span.Add(span, big.NewInt(int64(to.Nanosecond()-from.Nanosecond())))
	q, r := new(big.Int).QuoRem(span, big.NewInt(int64(d)), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > math.MaxInt {
		return math.MaxInt
	}
	return int(q.Int64())
}

// MonthStart is the start of the calendar month of t in loc, shifted by months (0: t's own
// month, 1: the next), in UTC.
func MonthStart(t time.Time, loc *time.Location, months int) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month()+time.Month(months), 1, 0, 0, 0, 0, loc).UTC()
}

// maxStepDays bounds a step of days (about 270 years, longer than any accepted window) so
// that days × 24 h and the windows' AddDate cannot overflow.
const maxStepDays = 100000

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
		if err != nil || days <= 0 || days > maxStepDays {
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
