package stored

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// NotAttributedError says which minutes of a window have no marker row (ErrNotAttributed):
// what the stored minutes bill there is missing, so a figure summed over them is short.
type NotAttributedError struct {
	From, To    time.Time // the window
	First, Last time.Time // its first and last minute not attributed
	Missing     int       // minutes not attributed
}

func (e *NotAttributedError) Error() string {
	return fmt.Sprintf("stored minutes of [%s, %s): %d of its %d minutes are %v, the first %s",
		e.From.UTC().Format(time.RFC3339), e.To.UTC().Format(time.RFC3339), e.Missing, int(e.To.Sub(e.From)/time.Minute),
		ErrNotAttributed, e.First.UTC().Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrNotAttributed) hold.
func (e *NotAttributedError) Unwrap() error { return ErrNotAttributed }

// markerCondition keeps the marker rows: one a minute attributed (appendUnallocated).
const markerCondition = `tenant = '` + report.Unallocated + `' AND allocation_id = '' AND node = ''`

// markerHoursQuery is, per hour of [from, to) rolled up, how many minutes its latest roll-up
// holds a marker of (arguments from, to, from, to): a roll-up is made of whatever minutes are
// stored, so an hour can be fresh and still short of 60.
var markerHoursQuery = `
SELECT hour, max(minutes)
FROM ` + tables.Final(tables.AttributionHours) + `
WHERE ` + chquery.HourWindow + ` AND ` + markerCondition + ` AND (hour, source_ns) IN (
    SELECT hour, max(source_ns) FROM ` + tables.AttributionHours + ` WHERE ` + chquery.HourWindow + ` GROUP BY hour)
GROUP BY hour`

// markerMinutesQuery is the minutes with a marker row under a condition on minute (which
// the caller appends, with its arguments), in time order.
const markerMinutesQuery = `
SELECT DISTINCT minute
FROM ` + tables.AttributionMinutes + `
WHERE ` + markerCondition + ` AND (`

// CheckAttributed is nil when every minute of the window has been attributed (has its marker
// row, as FromMinutesLines counts them), and a *NotAttributedError otherwise. Whole hours fresh
// in their roll-ups are checked there (no read of attribution_minutes); the other minutes, and
// hours rolled up short of 60 minutes, in one read of their marker rows.
func (h *StoredHours) CheckAttributed(ctx context.Context, conn Querier) error {
	type run struct{ from, to time.Time }
	var byMinute []run // in time order
	add := func(f, t time.Time) {
		if n := len(byMinute); n > 0 && byMinute[n-1].to.Equal(f) {
			byMinute[n-1].to = t
			return
		}
		byMinute = append(byMinute, run{f, t})
	}
	for _, sp := range h.spans {
		if !sp.hours {
			add(sp.from, sp.to)
			continue
		}
		full := map[int64]bool{}
		err := chquery.Each(ctx, conn, markerHoursQuery, sp.args(), func(scan func(...any) error) error {
			var (
				hour    time.Time
				minutes uint64
			)
			err := scan(&hour, &minutes)
			full[hour.Unix()] = minutes == 60
			return err
		})
		if err != nil {
			return fmt.Errorf("read which hours of [%s, %s) are attributed in full: %w", sp.from.Format(time.RFC3339), sp.to.Format(time.RFC3339), err)
		}
		for hr := sp.from; hr.Before(sp.to); hr = hr.Add(time.Hour) {
			if !full[hr.Unix()] {
				add(hr, hr.Add(time.Hour))
			}
		}
	}
	if len(byMinute) == 0 {
		return nil
	}
	conds := make([]string, 0, len(byMinute))
	args := make([]any, 0, 2*len(byMinute))
	for _, r := range byMinute {
		conds = append(conds, "("+tables.MinuteWindow+")")
		args = append(args, r.from.Unix(), r.to.Unix())
	}
	attributed := map[int64]bool{}
	err := chquery.Each(ctx, conn, markerMinutesQuery+strings.Join(conds, " OR ")+`)`, args, func(scan func(...any) error) error {
		var m time.Time
		err := scan(&m)
		attributed[m.Unix()] = true
		return err
	})
	if err != nil {
		return fmt.Errorf("read which minutes of [%s, %s) are attributed: %w", h.from.Format(time.RFC3339), h.to.Format(time.RFC3339), err)
	}
	var e *NotAttributedError
	for _, r := range byMinute {
		for m := r.from; m.Before(r.to); m = m.Add(time.Minute) {
			if attributed[m.Unix()] {
				continue
			}
			if e == nil {
				e = &NotAttributedError{From: h.from, To: h.to, First: m}
			}
			e.Last = m
			e.Missing++
		}
	}
	if e != nil {
		return e
	}
	return nil
}

// CheckAttributed is StoredHours.CheckAttributed of [from, to) (whole minutes).
func CheckAttributed(ctx context.Context, conn Querier, from, to time.Time) error {
	h, err := ReadStoredHours(ctx, conn, from, to)
	if err != nil {
		return fmt.Errorf("check that the minutes of [%s, %s) are attributed: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return h.CheckAttributed(ctx, conn)
}
