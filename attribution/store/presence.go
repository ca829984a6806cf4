package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Presence is when each GPU was sampled, for the capacity of the windows within what was read
// (Capacity; billing.Present: the union over a GPU's samples at ts of [ts, ts + period)).
//
// It holds, per GPU and bucket of time (a whole number of minutes, at most the period), the
// first and the last sample's ts_ns: a bucket's samples are less than the period apart, so
// their presence is one interval, and every source gives the same buckets to the ns (raw
// samples their ts_ns, the rollups their rows' first_ns and last_ns; a rollup row lies within
// one bucket). Hence one capacity whatever the path, and stored minutes that sum to the
// window's report.
type Presence struct {
	period   time.Duration
	source   Samples
	bucket   int64                          // ns
	from, to int64                          // the samples read: ts_ns in [from, to)
	spans    map[billing.GPU][]billing.Span // ascending by First
}

// PresenceOf is the presence of the given spans of each GPU (ascending by First), read from
// src in buckets of bucket ns over the samples of [from, to) (ts_ns) for period: what a
// reader of the presence from elsewhere (the fleet's hourly roll-up) gives as ReadPresence
// would.
func PresenceOf(period time.Duration, src Samples, bucket, from, to int64, spans map[billing.GPU][]billing.Span) *Presence {
	return &Presence{period: period, source: src, bucket: bucket, from: from, to: to, spans: spans}
}

// presenceQueries read (node, gpu_uuid, model, first ts_ns, last ts_ns) for every bucket of a
// GPU with a sample in [from, to); their arguments: the first and the last second of the time
// column to read (dateTimeArg: from less the source's row length, and to), from and to in ns,
// the bucket (ns for raw samples, seconds for the rollups). A rollup row counts
// where it overlaps [from, to): its samples outside are real samples, which only makes the
// union more complete (the read starts a period before what Capacity is asked for).
//
// No FINAL: copies of a sample share its ts_ns, and a rollup row's incomplete versions roll up
// fewer of its samples, so min and max are those of the complete row.
var presenceQueries = map[Samples]string{
	RawSamples: `
SELECT node, gpu_uuid, model, min(toInt64(ts_ns)), max(toInt64(ts_ns))
FROM ` + tables.Samples + `
WHERE time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
GROUP BY node, gpu_uuid, model, intDiv(toInt64(ts_ns), toInt64(?))`,
	SecondRollup: rollupPresenceQuery(tables.Samples1s, time.Second),
	MinuteRollup: rollupPresenceQuery(tables.Samples1m, time.Minute),
}

func rollupPresenceQuery(table string, step time.Duration) string {
	return strings.NewReplacer("{{table}}", table, "{{step}}", strconv.FormatInt(int64(step), 10)).Replace(`
SELECT node, gpu_uuid, model, min(toInt64(first_ns)), max(toInt64(last_ns))
FROM {{table}}
PREWHERE time >= toDateTime(?) AND time <= toDateTime(?)
WHERE toInt64(time) * 1000000000 + {{step}} > ? AND toInt64(time) * 1000000000 < ?
GROUP BY node, gpu_uuid, model, intDiv(toInt64(time), toInt64(?))`)
}

// presenceRow is how long a row of each source is: a rollup row's time column is its first
// second, so the read of the time column starts one row earlier.
var presenceRow = map[Samples]time.Duration{RawSamples: 0, SecondRollup: time.Second, MinuteRollup: time.Minute}

// CheckPresence fails for a presence period under a minute: the per-minute rollup could not
// tell where in a minute a GPU was present.
func CheckPresence(period time.Duration) error {
	if period < time.Minute {
		return fmt.Errorf("presence period %s: expected at least a minute", period)
	}
	return nil
}

// ReadPresence reads the presence of every GPU that can be capacity in the window: the samples
// from a period before its start to its end, in buckets as long as the period allows.
func ReadPresence(ctx context.Context, conn Querier, src Samples, window billing.Interval, period time.Duration) (*Presence, error) {
	if err := CheckPresence(period); err != nil {
		return nil, err
	}
	return readPresence(ctx, conn, src, window, period, int64(period.Truncate(time.Minute)), nil)
}

// Advance is ReadPresence for a window by minute buckets, reading only what p (nil: none) does
// not hold already: the attribution service's passes move a minute at a time, and a period
// (an hour) of raw samples is much to read every minute. The buckets from the window's start on
// are read again (late samples land there, and a minute's capacity must be what a report of it
// reads); p's earlier ones within the period before the window are kept, so a sample that
// lands there later is not seen, as the minutes before the window are not recomputed for it.
func (p *Presence) Advance(ctx context.Context, conn Querier, src Samples, window billing.Interval, period time.Duration) (*Presence, error) {
	if err := CheckPresence(period); err != nil {
		return nil, err
	}
	return readPresence(ctx, conn, src, window, period, int64(time.Minute), p)
}

func readPresence(ctx context.Context, conn Querier, src Samples, window billing.Interval, period time.Duration, bucket int64, prev *Presence) (*Presence, error) {
	q, ok := presenceQueries[src]
	if !ok {
		return nil, fmt.Errorf("sample source %d: expected RawSamples, SecondRollup or MinuteRollup", src)
	}
	if window.Start >= window.End {
		return nil, fmt.Errorf("read the presence of [%s, %s): expected the start before the end", billing.UTC(window.Start), billing.UTC(window.End))
	}
	// Whole buckets, so that those kept and those read again do not split one.
	start := chquery.FloorTo(window.Start-int64(period), bucket)
	next := &Presence{period: period, source: src, bucket: bucket, from: start, to: window.End, spans: map[billing.GPU][]billing.Span{}}
	read := start
	if prev != nil && prev.period == period && prev.source == src && prev.bucket == bucket && prev.from <= start && prev.to > start {
		read = min(prev.to, chquery.FloorTo(window.Start, bucket))
		for g, ss := range prev.spans {
			lo, _ := slices.BinarySearchFunc(ss, start, spanFirst)
			hi, _ := slices.BinarySearchFunc(ss, read, spanFirst)
			if lo < hi {
				next.spans[g] = slices.Clone(ss[lo:hi])
			}
		}
	}
	if read < next.to {
		arg := bucket
		if src != RawSamples {
			arg = bucket / int64(time.Second)
		}
		// The time column's bounds are computed here, clamped to what a DateTime holds: a window
		// that starts within a period of 1970 reaches before it, and ClickHouse wraps a negative
		// toDateTime (or one less a row's seconds) into 2106, which read no sample at all.
		first, last := chquery.DateTimeArg(read-int64(presenceRow[src])), chquery.DateTimeArg(next.to)
		err := chquery.Each(ctx, conn, q, []any{first, last, read, next.to, arg}, func(scan func(...any) error) error {
			var (
				g           billing.GPU
				first, last int64
			)
			if err := scan(&g.Node, &g.UUID, &g.Model, &first, &last); err != nil {
				return err
			}
			next.spans[g] = append(next.spans[g], billing.Span{First: first, Last: last})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read when the GPUs were sampled in [%s, %s) from %s: %w",
				billing.UTC(read).Format(time.RFC3339), billing.UTC(next.to).Format(time.RFC3339), src, err)
		}
	}
	for _, ss := range next.spans {
		slices.SortFunc(ss, func(a, b billing.Span) int { return cmp.Compare(a.First, b.First) })
	}
	return next, nil
}

func spanFirst(s billing.Span, ns int64) int { return cmp.Compare(s.First, ns) }

// Period is the presence period the presence was read for.
func (p *Presence) Period() time.Duration { return p.period }

// Source is where the presence was read from.
func (p *Presence) Source() Samples { return p.source }

// Capacity is, for every GPU present in the window, the intervals in which it is capacity
// (billing.Present). The window must lie within what was read: its end at most the read's, its
// start at least a period after the read's.
func (p *Presence) Capacity(window billing.Interval) (map[billing.GPU][]billing.Interval, error) {
	if window.Start-int64(p.period) < p.from || window.End > p.to || window.Start >= window.End {
		return nil, fmt.Errorf("the capacity of [%s, %s): the presence read covers the samples of [%s, %s), not the window and the %s before it",
			billing.UTC(window.Start).Format(time.RFC3339Nano), billing.UTC(window.End).Format(time.RFC3339Nano),
			billing.UTC(p.from).Format(time.RFC3339), billing.UTC(p.to).Format(time.RFC3339), p.period)
	}
	out := map[billing.GPU][]billing.Interval{}
	for g, ss := range p.spans {
		// A span is shorter than a bucket, at most the period: one that starts more than two
		// periods before the window ends before it.
		lo, _ := slices.BinarySearchFunc(ss, window.Start-2*int64(p.period), spanFirst)
		hi, _ := slices.BinarySearchFunc(ss, window.End, spanFirst)
		if ivs := billing.Present(ss[lo:hi], p.period, window); len(ivs) > 0 {
			out[g] = ivs
		}
	}
	return out, nil
}
