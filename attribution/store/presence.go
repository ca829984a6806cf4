package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Presence says which GPUs were sampled in which minute, so that a short window (the minute
// the attribution service stores) can count as capacity the GPUs whose exporter is out.
//
// Compute counts a GPU as capacity when it has a sample in the window, for the whole window.
// Over a long window an exporter outage changes nothing; over one minute it would drop the
// GPU from the minutes of the outage, and the stored minutes of a window would sum to less
// capacity (a smaller __unallocated__) than the window's report. With a presence lookback, a
// minute also counts every GPU sampled within the lookback before its end.
type Presence struct {
	lookback time.Duration
	source   Samples
	from, to int64                   // the minutes read: [from, to), unix seconds
	minutes  map[billing.GPU][]int64 // per GPU, the minutes (unix seconds of their start) with a sample, ascending
}

// presenceQueries read (node, gpu_uuid, model, minute) for every minute with a sample in
// [from, to): raw samples bucket ts_ns, as Compute reads them; a rollup row counts for the
// minute of its start (its rows never straddle a minute).
var presenceQueries = map[Samples]string{
	RawSamples: `
SELECT node, gpu_uuid, model, intDiv(toInt64(ts_ns), 60000000000) * 60 AS m
FROM samples
WHERE time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
GROUP BY node, gpu_uuid, model, m`,
	SecondRollup: rollupPresenceQuery(tables.Samples1s),
	MinuteRollup: rollupPresenceQuery(tables.Samples1m),
}

func rollupPresenceQuery(table string) string {
	return strings.ReplaceAll(`
SELECT node, gpu_uuid, model, intDiv(toInt64(time), 60) * 60 AS m
FROM {{table}}
PREWHERE time >= toDateTime(?) AND time <= toDateTime(?)
WHERE toInt64(time) * 1000000000 >= ? AND toInt64(time) * 1000000000 < ?
GROUP BY node, gpu_uuid, model, m`, "{{table}}", table)
}

// ReadPresence reads which GPUs were sampled in which minute, for the windows of whole minutes
// within [from, to) and their lookback: [from − lookback, to). A lookback under a minute is a
// minute (a window counts what it samples itself); it is rounded up to whole minutes.
func ReadPresence(ctx context.Context, conn Querier, from, to time.Time, lookback time.Duration, source Samples) (*Presence, error) {
	var p *Presence
	return p.Advance(ctx, conn, from, to, lookback, source)
}

// Advance is ReadPresence for the windows within [from, to), reading only what p (nil: none)
// does not hold already: the attribution service's passes move a minute at a time, and an hour
// of raw samples is much to read every minute. The minutes from from on are read again (late
// samples land there, and a window's own minutes must be what Compute sees in them); p's
// earlier minutes within the lookback are kept.
func (p *Presence) Advance(ctx context.Context, conn Querier, from, to time.Time, lookback time.Duration, source Samples) (*Presence, error) {
	q, ok := presenceQueries[source]
	if !ok {
		return nil, fmt.Errorf("sample source %d: expected RawSamples, SecondRollup or MinuteRollup", source)
	}
	lookback = max(lookback, time.Minute)
	if r := lookback % time.Minute; r != 0 {
		lookback += time.Minute - r
	}
	start, end := from.Truncate(time.Minute).Add(-lookback).Unix(), to.Unix()
	next := &Presence{lookback: lookback, source: source, from: start, to: end, minutes: map[billing.GPU][]int64{}}
	read := start
	if p != nil && p.lookback == lookback && p.source == source && p.from <= start && p.to > start {
		read = min(p.to, from.Truncate(time.Minute).Unix())
		for g, ms := range p.minutes {
			lo, _ := slices.BinarySearch(ms, start)
			hi, _ := slices.BinarySearch(ms, read)
			if lo < hi {
				next.minutes[g] = append([]int64(nil), ms[lo:hi]...)
			}
		}
	}
	if err := next.read(ctx, conn, q, read*int64(time.Second), end*int64(time.Second)); err != nil {
		return nil, err
	}
	return next, nil
}

// read adds the minutes sampled in [start, end) (ns; whole minutes after every minute held).
func (p *Presence) read(ctx context.Context, conn Querier, q string, start, end int64) error {
	if start >= end {
		return nil
	}
	err := queryEach(ctx, conn, q, []any{seconds(start), seconds(end), start, end}, func(scan func(...any) error) error {
		var (
			g billing.GPU
			m int64
		)
		if err := scan(&g.Node, &g.UUID, &g.Model, &m); err != nil {
			return err
		}
		p.minutes[g] = append(p.minutes[g], m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the GPUs sampled in [%s, %s): %w", time.Unix(0, start).UTC().Format(time.RFC3339), time.Unix(0, end).UTC().Format(time.RFC3339), err)
	}
	for _, ms := range p.minutes {
		slices.Sort(ms)
	}
	return nil
}

// Lookback is how far before a window's end a sample makes its GPU capacity (whole minutes).
func (p *Presence) Lookback() time.Duration { return p.lookback }

// Extend adds to rep, Compute's report of [from, to) (whole minutes, within what the presence
// was read for), the list cost over the window of every GPU sampled within the lookback before
// to but not in the window itself (those Compute counted already): to the capacity and, since
// no tenant holds more for it, to the unallocated row. It returns the GPUs added, by name.
func (p *Presence) Extend(rep report.Report, from, to time.Time, book *pricebook.PriceBook) (report.Report, []string, error) {
	if !from.Equal(from.Truncate(time.Minute)) || !to.Equal(to.Truncate(time.Minute)) || !from.Before(to) {
		return rep, nil, fmt.Errorf("extend the capacity of [%s, %s): expected whole minutes, start before end", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	since := to.Add(-max(p.lookback, to.Sub(from))).Unix()
	f, t := from.Unix(), to.Unix()
	if since < p.from || t > p.to {
		return rep, nil, fmt.Errorf("extend the capacity of [%s, %s): the presence read covers [%s, %s), not the window and its lookback",
			from.Format(time.RFC3339), to.Format(time.RFC3339), time.Unix(p.from, 0).UTC().Format(time.RFC3339), time.Unix(p.to, 0).UTC().Format(time.RFC3339))
	}
	extra := billing.NewFleet()
	var names []string
	for g, ms := range p.minutes {
		// The first sampled minute at or after the lookback's start: present when it is
		// before the end, counted already when it is also in the window.
		i, _ := slices.BinarySearch(ms, since)
		if i == len(ms) || ms[i] >= t {
			continue
		}
		if j, _ := slices.BinarySearch(ms, f); j < len(ms) && ms[j] < t {
			continue
		}
		extra.GPUs[g] = true
		names = append(names, g.Node+"/"+g.UUID)
	}
	if len(names) == 0 {
		return rep, nil, nil
	}
	slices.Sort(names)
	list, err := billing.CapacityListCost(extra, billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}, book)
	if err != nil {
		return rep, nil, fmt.Errorf("price the GPUs present but not sampled in [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	rep.CapacityListCost += list
	rep.UnallocatedListCost += list
	return rep, names, nil
}
