package stored

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Recomputations the attribution service owes (table recomputations): recorded before any
// minute is rewritten, advanced as passes store the minutes, done at the end, so that a
// restart or another replica finishes what a pass left.

// Reasons of a recomputation.
const (
	ReasonAllocation = "allocation" // allocations received late or changed
	ReasonPriceBook  = "price_book" // the price book changed what it bills
	ReasonMissing    = "missing"    // minutes with no stored pass (holes)
	// ReasonBackfill: minutes never attributed before the first stored one, from the start of
	// the billing period still open at the service's start (README, "Recomputation and holes").
	ReasonBackfill = "backfill"
	// ReasonPeriodClose: minutes of a billing period due to close that were never attributed
	// (a service started after it, a month closed by hand before it): the close needs them.
	ReasonPeriodClose = "period_close"
)

// FirstAttribution says whether the reason is minutes never attributed before (a backfill),
// rather than stored minutes gone stale or lost.
func FirstAttribution(reason string) bool {
	return reason == ReasonBackfill || reason == ReasonPeriodClose
}

// Recomputation is the minutes [From, To) of Nodes (none: every node) to attribute again.
type Recomputation struct {
	ID     string
	Reason string
	What   string // what changed, for logs
	Nodes  []string
	// From, To: the minutes to attribute again; Next: how far that has come.
	From, To, Next time.Time
	// Progress is, with several replicas, how far it came for each node (none: From).
	Progress map[string]time.Time
	Updated  time.Time
}

// Done says whether no minute remains: Next reached To, or every one of Nodes did.
func (r Recomputation) Done() bool {
	if !r.Next.Before(r.To) {
		return true
	}
	if len(r.Nodes) == 0 {
		return false
	}
	for _, n := range r.Nodes {
		if r.NodeNext(n).Before(r.To) {
			return false
		}
	}
	return true
}

// NodeNext is how far the recomputation came for node.
func (r Recomputation) NodeNext(node string) time.Time {
	next := maxTime(r.From, r.Next)
	if p, ok := r.Progress[node]; ok && p.After(next) {
		next = p
	}
	return next
}

// Remaining is the minutes still to attribute again: of the node furthest behind.
func (r Recomputation) Remaining() int {
	if r.Done() {
		return 0
	}
	next := maxTime(r.From, r.Next)
	if len(r.Nodes) > 0 {
		next = r.To
		for _, n := range r.Nodes {
			next = minTime(next, r.NodeNext(n))
		}
	}
	return int(r.To.Sub(next) / time.Minute)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// openQuery is the latest state of every record not done; progressQuery how far each of
// their nodes came.
const (
	openQuery = `
SELECT id, argMax(reason, updated_ns), argMax(what, updated_ns), argMax(nodes, updated_ns), argMax(from_ns, updated_ns),
    argMax(to_ns, updated_ns), argMax(next_ns, updated_ns), max(updated_ns)
FROM ` + tables.Recomputations + `
WHERE node = ''
GROUP BY id
HAVING argMax(next_ns, updated_ns) < argMax(to_ns, updated_ns)
ORDER BY id`
	progressQuery = `
SELECT id, node, max(next_ns)
FROM ` + tables.Recomputations + `
WHERE node != '' AND id IN (SELECT id FROM ` + tables.Recomputations + ` WHERE node = '' GROUP BY id
    HAVING argMax(next_ns, updated_ns) < argMax(to_ns, updated_ns))
GROUP BY id, node`
)

// OpenRecomputations is every recomputation not done, oldest id first, with its progress.
func OpenRecomputations(ctx context.Context, conn Querier) ([]Recomputation, error) {
	var out []Recomputation
	err := chquery.Each(ctx, conn, openQuery, nil, func(scan func(...any) error) error {
		var (
			r              Recomputation
			from, to, next int64
			updated        uint64
		)
		if err := scan(&r.ID, &r.Reason, &r.What, &r.Nodes, &from, &to, &next, &updated); err != nil {
			return err
		}
		r.From, r.To, r.Next, r.Updated = unixNS(from), unixNS(to), unixNS(next), unixNS(int64(updated))
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the recomputations not done: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	byID := map[string]*Recomputation{}
	for i := range out {
		byID[out[i].ID] = &out[i]
	}
	err = chquery.Each(ctx, conn, progressQuery, nil, func(scan func(...any) error) error {
		var (
			id, node string
			next     int64
		)
		if err := scan(&id, &node, &next); err != nil {
			return err
		}
		if r := byID[id]; r != nil {
			if r.Progress == nil {
				r.Progress = map[string]time.Time{}
			}
			r.Progress[node] = unixNS(next)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read how far the recomputations came: %w", err)
	}
	return out, nil
}

// RecordRecomputation appends the state of a record (a new one, its progress, its end).
func RecordRecomputation(ctx context.Context, conn driver.Conn, r Recomputation) error {
	return appendRecomputation(ctx, conn, r, []string{""}, r.Next)
}

// RecordProgress appends how far the recomputation came for each of nodes: next.
func RecordProgress(ctx context.Context, conn driver.Conn, r Recomputation, nodes []string, next time.Time) error {
	if len(nodes) == 0 {
		return nil
	}
	return appendRecomputation(ctx, conn, r, nodes, next)
}

func appendRecomputation(ctx context.Context, conn driver.Conn, r Recomputation, nodes []string, next time.Time) error {
	batch, err := conn.PrepareBatch(ctx, tables.Insert(tables.Recomputations, tables.RecomputationColumns))
	if err != nil {
		return fmt.Errorf("prepare the record of recomputation %s: %w", r.ID, err)
	}
	for _, n := range nodes {
		recNodes := r.Nodes
		if recNodes == nil {
			recNodes = []string{}
		}
		if err := batch.Append(r.ID, n, r.Reason, r.What, recNodes, nsOf(r.From), nsOf(r.To), nsOf(next), uint64(nsOf(r.Updated))); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("append the record of recomputation %s: %w", r.ID, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("record recomputation %s (%s, [%s, %s), next %s): %w", r.ID, r.Reason, r.From.Format(time.RFC3339),
			r.To.Format(time.RFC3339), next.Format(time.RFC3339), err)
	}
	return nil
}

// Pending is how many minutes of [from, to) remain to be attributed again, per reason, by
// the recomputations not done (a period is not closed over them).
func Pending(ctx context.Context, conn Querier, from, to time.Time) (map[string]int, error) {
	open, err := OpenRecomputations(ctx, conn)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, r := range open {
		if n := r.pendingIn(from, to); n > 0 {
			out[r.Reason] += n
		}
	}
	return out, nil
}

// pendingIn is the minutes of [from, to) it has still to attribute again (of the node furthest
// behind).
func (r Recomputation) pendingIn(from, to time.Time) int {
	left := r.Remaining()
	if left == 0 {
		return 0
	}
	start := r.To.Add(-time.Duration(left) * time.Minute)
	start, end := maxTime(start, from), minTime(r.To, to)
	if !start.Before(end) {
		return 0
	}
	return int(end.Sub(start) / time.Minute)
}

// Run is a run of minutes [From, To).
type Run struct{ From, To time.Time }

// markerHourCounts is, per hour of [from, to), how many of its minutes have a marker row.
const markerHourCounts = `
SELECT toStartOfHour(minute) AS h, uniqExact(minute)
FROM ` + tables.AttributionMinutes + `
WHERE ` + markerCondition + ` AND ` + tables.MinuteWindow + `
GROUP BY h`

// MissingMinutes is the minutes of [from, to) (whole minutes) with no stored pass (no marker
// row), as runs in time order. Hours with every minute are found from a count per hour; only
// hours with some of their minutes are read minute by minute.
func MissingMinutes(ctx context.Context, conn Querier, from, to time.Time) ([]Run, error) {
	from, to = from.Truncate(time.Minute), to.Truncate(time.Minute)
	if !from.Before(to) {
		return nil, nil
	}
	counts := map[int64]int{}
	err := chquery.Each(ctx, conn, markerHourCounts, []any{from.Unix(), to.Unix()}, func(scan func(...any) error) error {
		var (
			h time.Time
			n uint64
		)
		err := scan(&h, &n)
		counts[h.Unix()] = int(n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count the attributed minutes of [%s, %s) by hour: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	var runs []Run
	add := func(f, t time.Time) {
		if n := len(runs); n > 0 && runs[n-1].To.Equal(f) {
			runs[n-1].To = t
			return
		}
		runs = append(runs, Run{f, t})
	}
	for h := from.Truncate(time.Hour); h.Before(to); h = h.Add(time.Hour) {
		f, t := maxTime(h, from), minTime(h.Add(time.Hour), to)
		n := counts[h.Unix()]
		switch {
		case n == 0:
			add(f, t)
			continue
		case n >= int(t.Sub(f)/time.Minute):
			continue
		}
		seen := map[int64]bool{}
		err := chquery.Each(ctx, conn, markerMinutesQuery+tables.MinuteWindow+`)`, []any{f.Unix(), t.Unix()}, func(scan func(...any) error) error {
			var m time.Time
			err := scan(&m)
			seen[m.Unix()] = true
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read which minutes of [%s, %s) are attributed: %w", f.Format(time.RFC3339), t.Format(time.RFC3339), err)
		}
		for m := f; m.Before(t); m = m.Add(time.Minute) {
			if !seen[m.Unix()] {
				add(m, m.Add(time.Minute))
			}
		}
	}
	return runs, nil
}

// NextFor is the earliest minute the recomputation still owes the nodes owns accepts (nil:
// every node); ok is false when it owes them none.
func (r Recomputation) NextFor(owns func(string) bool) (next time.Time, ok bool) {
	if r.Done() {
		return time.Time{}, false
	}
	if owns == nil || len(r.Nodes) == 0 {
		return maxTime(r.From, r.Next), true
	}
	for _, n := range r.Nodes {
		if at := r.NodeNext(n); owns(n) && at.Before(r.To) && (!ok || at.Before(next)) {
			next, ok = at, true
		}
	}
	return next, ok
}
