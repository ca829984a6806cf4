package request

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// MaxAdviceWindow bounds an advice request's window before anything is read: the needs are
// read per allocation-minute, so a window's cost grows with it (a quarter of samples_1m).
const MaxAdviceWindow = 92 * 24 * time.Hour

// Advice is a parsed advice request: `slicemeter advise`'s flags or GET /api/v1/advice's query.
type Advice struct {
	Options advice.Options
	By      advice.By
	Format  advice.Format
}

// AdviceParams name the advice request's parameters by their API names; the command's flags
// are these with "--" (and the headrooms and minimum under "advise.").
var AdviceParams = map[string]string{
	"from": "--from", "to": "--to", "by": "--by", "format": "--format",
	"compute_headroom": "--advise.compute-headroom", "memory_headroom": "--advise.memory-headroom",
	"min_measured": "--advise.min-measured",
}

// ParseAdvice reads an advice request from its parameters: from and to (RFC 3339; to defaults
// to now, from to DefaultWindow before to), by (allocation, tenant or model), format (csv or
// json), compute_headroom and memory_headroom (ratios, defaults 0.2 and 0.1) and min_measured
// (a duration, default 1h). The window is at most MaxAdviceWindow. An error is an *Error
// naming the parameter.
func ParseAdvice(p Params, now time.Time) (Advice, error) {
	a := Advice{Options: advice.Options{Headroom: advice.DefaultHeadroom, MinMeasured: advice.DefaultMinMeasured}}
	from, to := p.Get("from"), p.Get("to")
	end := now.UTC()
	if to != "" {
		t, err := parseTime("to", to)
		if err != nil {
			return Advice{}, err
		}
		end = t
	}
	start := end.Add(-advice.DefaultWindow)
	if from != "" {
		t, err := parseTime("from", from)
		if err != nil {
			return Advice{}, err
		}
		start = t
	}
	if !end.After(start) {
		return Advice{}, &Error{"to", fmt.Errorf("%s: expected after from (%s)", end.Format(time.RFC3339), start.Format(time.RFC3339))}
	}
	if end.Sub(start) > MaxAdviceWindow {
		return Advice{}, &Error{"from", fmt.Errorf("a window of %s: expected at most %s", end.Sub(start), MaxAdviceWindow)}
	}
	a.Options.From, a.Options.To = start, end
	var err error
	if a.By, err = advice.ParseBy(p.Get("by")); err != nil {
		return Advice{}, &Error{"by", err}
	}
	if a.Format, err = advice.ParseFormat(p.Get("format")); err != nil {
		return Advice{}, &Error{"format", err}
	}
	for _, h := range []struct {
		name string
		dst  *float64
	}{{"compute_headroom", &a.Options.Headroom.Compute}, {"memory_headroom", &a.Options.Headroom.Memory}} {
		v := p.Get(h.name)
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 10 || f != f {
			return Advice{}, &Error{h.name, fmt.Errorf("%q: expected a ratio from 0 to 10 (0.2 is 20 %% headroom)", v)}
		}
		*h.dst = f
	}
	if v := p.Get("min_measured"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return Advice{}, &Error{"min_measured", fmt.Errorf("%q: expected a duration of 0 or more such as 1h or 30m", v)}
		}
		a.Options.MinMeasured = d
	}
	return a, nil
}

// parseTime is one edge of a window, an RFC 3339 time or a date (midnight UTC) as report's
// --from/--to, checked as every door checks times.
func parseTime(name, value string) (time.Time, error) {
	t, err := report.ParseTime(value)
	if err != nil {
		return time.Time{}, &Error{name, fmt.Errorf("%q: expected an RFC 3339 time such as 2026-01-05T00:00:00Z or a date such as 2026-01-05 (midnight UTC)", value)}
	}
	if r := validate.CheckTime(name, strconv.Quote(value), t); r != nil {
		return time.Time{}, &Error{name, r}
	}
	return t.UTC(), nil
}

// AdviceFlagError names a bad parameter of an advice request by the command's flag.
func AdviceFlagError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return fmt.Errorf("%s: %w", AdviceParams[e.Param], e.Err)
	}
	return err
}
