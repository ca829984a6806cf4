package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/fleet/fleetstore"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/internal/lograte"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Passes says which minutes a pass attributes.
type Passes struct {
	// Delay: a minute is closed, and attributed, this long after its end (samples arrive
	// through Kafka a little late).
	Delay time.Duration
	// Lookback: every pass attributes again the closed minutes this far back, so that late
	// samples land in the stored minutes.
	Lookback time.Duration
	// Backfill: with nothing stored yet, the first pass starts this far back.
	Backfill time.Duration
	// MaxRecompute bounds how far back an allocation that arrives late makes a pass go.
	MaxRecompute time.Duration
	// MaxMinutes bounds the minutes of one pass (the rest wait for the next; the lag shows it).
	MaxMinutes int
	// Samples is where sample aggregates are read from (raw samples or the per-second rollup).
	Samples store.Samples
	// Presence is the presence period (attribution.Options.Presence; zero: the default): a GPU
	// is capacity from each of its samples for this long. Reports must use the same period for
	// the stored minutes to sum to them.
	Presence time.Duration
	// Shards says which nodes this replica attributes when several share the fleet (nil: all).
	Shards Shards
	// OpenFrom, when set, is where the billing periods the service will close begin, as of now
	// (the start of the month still open, or of the one before while that is not closed
	// automatically yet): the first pass records the minutes from there to the first stored
	// minute that no pass stored (reason backfill), so that a fresh install attributes its
	// open period and can close it, and later passes attribute them oldest first.
	OpenFrom func(now time.Time) time.Time
	// HoleScan: how often the stored minutes are searched for holes (minutes with no stored
	// pass between the first and the latest attributed one); zero: DefaultHoleScan. The first
	// pass always searches.
	HoleScan time.Duration
}

// DefaultHoleScan is how often the passes look for holes by default.
const DefaultHoleScan = 10 * time.Minute

// DefaultPasses are the service's defaults.
var DefaultPasses = Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 31 * 24 * time.Hour, MaxMinutes: 120,
	Presence: attribution.DefaultPresence}

// Observer is told about each minute a pass attributed; fresh is false for a minute that was
// attributed before (a recomputation).
type Observer interface {
	Minute(m stored.Minute, fresh bool, violations []error)
}

// Runner attributes closed minutes, pass after pass. It is not safe for concurrent passes.
type Runner struct {
	conn     driver.Conn
	book     *pricebook.PriceBook
	cfg      Passes
	observer Observer
	logger   *slog.Logger
	logs     *lograte.Limiter // what recurs in every minute: at most a line per reason per minute
	now      func() time.Time

	done time.Time // end of the latest minute attributed (zero: read from ClickHouse)
	// watermark: allocations received at or after it are news, except those in seen (the
	// versions already handled that were received in the watermark's second).
	watermark time.Time
	seen      map[string]uint64
	redo      time.Time       // a recomputation for late allocations resumes here (zero: none)
	presence  *store.Presence // of the latest pass; the next reads only what is new
	// generation of the Shards assignment the latest pass completed with (assigned: one did).
	generation int64
	assigned   bool
	// book0 is the runner's book as recorded in price_books, with the re-attribution its
	// change makes (adopted: recorded at the first pass).
	book0   stored.BookRecord
	adopted bool
	// holes: when the stored minutes were last searched for holes; owed: the minutes still to
	// attribute again (stale) or with no stored pass (missing), after the latest pass.
	holes                   time.Time
	stale, absent, backfill atomic.Int64 // read by the gauges while a pass runs
	backfilled              bool         // the open period's backfill is recorded (OpenFrom)
	backlogNext             bool         // the latest pass was a live turn: the next one does the owed minutes

	report func(context.Context, store.Querier, *pricebook.PriceBook, attribution.Options) (attribution.Result, error) // attribution.Report
	// coldStarts: the first attached samples found, for the minutes of the next passes (a
	// pass attributes the lookback's minutes again, each of which searched them).
	coldStarts *store.ColdStarts
}

// NewRunner attributes with the price book into conn; observer may be nil.
func NewRunner(conn driver.Conn, book *pricebook.PriceBook, cfg Passes, observer Observer, logger *slog.Logger) *Runner {
	if cfg.MaxMinutes <= 0 {
		cfg.MaxMinutes = DefaultPasses.MaxMinutes
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{conn: conn, book: book, cfg: cfg, observer: observer, logger: logger, logs: lograte.New(logger, time.Minute), now: time.Now,
		report: attribution.Report, coldStarts: store.NewColdStarts()}
}

// ColdStarts is what the passes remember of the allocations' first attached samples, for the
// other reports the service makes beside them (the trailing window's).
func (r *Runner) ColdStarts() *store.ColdStarts { return r.coldStarts }

// Pass is what one pass did.
type Pass struct {
	From, To   time.Time // the minutes attributed: [From, To)
	Fresh      int       // minutes attributed for the first time
	Recomputed int
	Violations int // invariant violations found: logged, and told to the observer; not an error
	// Failed are the minutes that could not be attributed (not stored by this pass; those still
	// within the lookback are tried again by the next): one bad minute does not stop the others.
	Failed []error
	Done   time.Time
	// Behind: the pass stopped at MaxMinutes before the latest closed minute; the next one
	// has minutes waiting already (the service runs it without waiting for the interval).
	Behind bool
}

// Once runs one pass: the closed minutes from the lookback (or from where a late allocation
// starts, or where a node gained from another replica is behind) to the latest closed minute,
// at most MaxMinutes of them, oldest first. With Shards, only the nodes of the assignment
// taken at the pass's start.
func (r *Runner) Once(ctx context.Context) (Pass, error) {
	now := r.now().UTC()
	closed := now.Add(-r.cfg.Delay).Truncate(time.Minute)
	a, ok := r.assignment()
	if !ok {
		r.logs.Log(ctx, now, slog.LevelInfo, "unassigned", "this replica owns no nodes yet: the pass attributes nothing")
		r.logs.Flush(ctx, now)
		return Pass{Done: r.done}, nil
	}
	if r.done.IsZero() {
		if err := r.resume(ctx, closed); err != nil {
			return Pass{}, err
		}
	}
	if !r.adopted {
		if err := r.adopt(ctx); err != nil {
			return Pass{Done: r.done}, err
		}
		r.adopted = true
	}
	// What makes stored minutes stale is recorded before any minute is rewritten: a restart,
	// or the replica owning the nodes after a rebalance, finishes it (recompute.go).
	watermark, seen := r.watermark, r.seen
	late, err := r.late(ctx, a.Owns)
	if err != nil {
		return Pass{}, err
	}
	if err := r.recordLate(ctx, late, closed, now); err != nil {
		r.watermark, r.seen = watermark, seen // not recorded: the next pass takes them again
		return Pass{Done: r.done}, err
	}
	if err := r.recordBackfill(ctx, closed, now); err != nil {
		return Pass{Done: r.done}, err
	}
	if err := r.findHoles(ctx, closed, now, a.Owns); err != nil {
		return Pass{Done: r.done}, err
	}
	open, err := stored.OpenRecomputations(ctx, r.conn)
	if err != nil {
		return Pass{Done: r.done}, err
	}
	r.count(ctx, open, now)
	owed := owedFrom(open, a.Owns)
	live := r.liveTurn(closed, owed, owedFrom(slices.DeleteFunc(slices.Clone(open), func(rec stored.Recomputation) bool {
		return stored.FirstAttribution(rec.Reason)
	}), a.Owns))
	from, to := r.span(closed, owed, live)
	p := Pass{From: from, To: to, Done: r.done, Behind: live || to.Before(closed)}
	if !from.Before(to) {
		return p, nil
	}
	// The GPUs' presence for the whole pass at once, reading only what the last pass had not.
	period := attribution.Options{Presence: r.cfg.Presence}.PresencePeriod()
	presence, err := r.presence.Advance(ctx, r.conn, r.cfg.Samples, billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}, period)
	if err != nil {
		return p, err
	}
	if r.cfg.Shards != nil && (!r.assigned || a.Generation != r.generation) {
		// Nodes gained may be behind: their previous owner stopped mid-pass, or long ago.
		back, err := r.behind(ctx, closed, from, a.Owns, presence.Nodes())
		if err != nil {
			return p, err
		}
		if r.redoFrom(back, closed); r.redo.Before(from) {
			from, to = r.span(closed, owed, live)
			p.From, p.To, p.Behind = from, to, live || to.Before(closed)
			if presence, err = r.presence.Advance(ctx, r.conn, r.cfg.Samples, billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}, period); err != nil {
				return p, err
			}
		}
	}
	r.presence = presence
	// A first attached sample found before the lookback is final: a sample that arrives later
	// than that changes no stored minute either.
	r.coldStarts.Pass(closed.Add(-r.cfg.Lookback))
	storedNodes, err := stored.StoredNodes(ctx, r.conn, from, to)
	if err != nil {
		return p, err
	}
	empty, err := r.emptyMinutes(ctx, presence, from, to)
	if err != nil {
		return p, err
	}
	var minutes []stored.Minute
	var violations [][]error
	var failed time.Time // the first minute not stored: no recomputation advances past it
	for m := from; m.Before(to); m = m.Add(time.Minute) {
		if empty(m) {
			// Nothing to bill: only the marker (and the zero rows of nodes stored before).
			rep := report.Report{WindowStart: m, WindowEnd: m.Add(time.Minute), Currency: r.book.Currency, UnallocatedByNode: map[string]float64{}}
			minutes = append(minutes, stored.Minute{Start: m, Report: rep, Stale: staleNodes(storedNodes[m.Unix()], rep, a.Owns)})
			violations = append(violations, nil)
			continue
		}
		res, err := r.report(ctx, r.conn, r.book, attribution.Options{From: m, To: m.Add(time.Minute), Samples: r.cfg.Samples, Lines: true,
			Presence: period, Present: presence, Now: now, Delay: reportDelay(r.cfg.Delay), Nodes: a.Owns, ColdStarts: r.coldStarts})
		if err != nil && !errors.Is(err, attribution.ErrInvariants) {
			err = fmt.Errorf("attribute the minute %s: %w", m.Format(time.RFC3339), err)
			// ClickHouse unreachable or the pass cancelled: the whole pass is retried, as no
			// minute can be read. Otherwise the error is this minute's: the others go on.
			if ctx.Err() != nil || r.conn.Ping(ctx) != nil {
				return p, err
			}
			p.Failed = append(p.Failed, err)
			if failed.IsZero() {
				failed = m
			}
			r.logs.Log(ctx, now, slog.LevelError, "minute_failed", "a minute could not be attributed; the pass goes on with the others",
				"minute", m, "err", err)
			continue
		}
		r.logProblems(ctx, now, m, res.Report, res.Violations)
		p.Violations += len(res.Violations)
		minutes = append(minutes, stored.Minute{Start: m, Report: res.Report, Lines: res.Lines, Stale: staleNodes(storedNodes[m.Unix()], res.Report, a.Owns)})
		violations = append(violations, res.Violations)
	}
	r.logs.Flush(ctx, now)
	version, err := stored.NextPass(ctx, r.conn, from, to, now)
	if err != nil {
		return p, err
	}
	if err := stored.WriteMinutes(ctx, r.conn, minutes, version); err != nil {
		return p, err
	}
	// Only once the minutes are stored: killed before this, the next runner does them again.
	reached := to
	if !failed.IsZero() {
		reached = failed
	}
	if err := r.advance(ctx, open, from, reached, a.Owns, now); err != nil {
		return p, err
	}
	// The hours this pass completed or recomputed are rolled up again. A roll-up that fails
	// costs only speed: readers take an hour from its minutes until its roll-up matches them.
	// With several replicas each rolls up after its own write, from everything stored by then:
	// the roll-up after the last write of an hour sees every replica's minutes, and one made
	// before it is stale (NextPass: the later write has a later version) and not read.
	if len(minutes) > 0 {
		from, to := minutes[0].Start, minutes[len(minutes)-1].Start.Add(time.Minute)
		if err := errors.Join(stored.RollupHours(ctx, r.conn, from, to), fleetstore.RollupFleetHours(ctx, r.conn, from, to)); err != nil {
			if ctx.Err() != nil {
				return p, err
			}
			r.logs.Log(ctx, now, slog.LevelWarn, "hours_rollup_failed", "the stored minutes could not be rolled up by hour; reports read them minute by minute",
				"err", err)
		}
	}
	for i, m := range minutes {
		fresh := !m.Start.Before(r.done)
		if fresh {
			p.Fresh++
		} else {
			p.Recomputed++
		}
		if r.observer != nil {
			r.observer.Minute(m, fresh, violations[i])
		}
	}
	if to.After(r.done) {
		r.done = to
	}
	// A recomputation cut short resumes where this pass stopped (a live turn did none of it).
	if !r.redo.IsZero() && !live {
		r.redo = to
		if !to.Before(minTime(r.done, closed.Add(-r.cfg.Lookback).Truncate(time.Minute))) {
			r.redo = time.Time{}
		}
	}
	r.repriced(ctx, now, open)
	r.generation, r.assigned = a.Generation, true
	p.Done = r.done
	return p, nil
}

// emptyMinutes says which of the pass's minutes have nothing to bill: no GPU is capacity in
// them and no allocation is billed in them (a backfill of the time before the fleet's first
// sample, a quiet month). Their reports are empty, and the pass stores them without computing
// each (a month of them is one insert, not 44,640 reports). It reads the pass's allocations
// once, and answers per minute from the union of their billed time and the GPUs' capacity.
func (r *Runner) emptyMinutes(ctx context.Context, presence *store.Presence, from, to time.Time) (func(time.Time) bool, error) {
	none := func(time.Time) bool { return false }
	window := billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}
	capacity, err := presence.Capacity(window)
	if err != nil {
		return none, nil // not known to be empty: computed minute by minute
	}
	allocs, err := store.ReadAllocations(ctx, r.conn, window)
	if err != nil {
		return none, err
	}
	var busy []billing.Interval
	for _, ivs := range capacity {
		busy = append(busy, ivs...)
	}
	for _, a := range allocs {
		if iv, ok := a.Billed(window); ok {
			busy = append(busy, iv)
		}
	}
	// Merged and sorted: a minute is busy when it overlaps one of them.
	slices.SortFunc(busy, func(a, b billing.Interval) int { return cmp.Compare(a.Start, b.Start) })
	var merged []billing.Interval
	for _, iv := range busy {
		if n := len(merged); n > 0 && iv.Start <= merged[n-1].End {
			merged[n-1].End = max(merged[n-1].End, iv.End)
			continue
		}
		merged = append(merged, iv)
	}
	return func(m time.Time) bool {
		start, end := m.UnixNano(), m.Add(time.Minute).UnixNano()
		// The first merged interval ending after the minute's start: busy if it starts before its end.
		i, _ := slices.BinarySearchFunc(merged, start, func(iv billing.Interval, t int64) int {
			if iv.End <= t {
				return -1
			}
			return 1
		})
		return i == len(merged) || merged[i].Start >= end
	}, nil
}

// assignment is the nodes this pass attributes: every node (Owns nil) without Shards; ok is
// false while the replica owns none.
func (r *Runner) assignment() (Assignment, bool) {
	if r.cfg.Shards == nil {
		return Assignment{}, true
	}
	a, ok := r.cfg.Shards.Assignment()
	if ok && a.Owns == nil {
		a.Owns = func(string) bool { return false }
	}
	return a, ok
}

// Nodes is what the replica attributes now (nil: every node, without Shards); ok is false while
// it owns none.
func (r *Runner) Nodes() (owns func(string) bool, ok bool) {
	a, ok := r.assignment()
	return a.Owns, ok
}

// redoFrom makes the passes recompute from at (zero: nothing to do), bounded by MaxRecompute.
func (r *Runner) redoFrom(at, closed time.Time) {
	if at.IsZero() {
		return
	}
	at = maxTime(at.Truncate(time.Minute), closed.Add(-r.cfg.MaxRecompute).Truncate(time.Minute))
	if r.redo.IsZero() || at.Before(r.redo) {
		r.redo = at
	}
}

// liveTurn says whether this pass attributes only the latest minutes (the lookback and the
// fresh ones), leaving the minutes owed before them to the next pass. While minutes never
// attributed (a backfill, a period's close) wait before the lookback, more than a pass holds,
// passes alternate between the fresh minutes, when one has closed, and the oldest owed ones,
// so that a long backfill does not hold the live minutes, and what reads them, back for hours.
// A recomputation of stored minutes (owedStale, r.redo) goes first, as before: it is short,
// and what it corrects is billed already.
func (r *Runner) liveTurn(closed, owed, owedStale time.Time) bool {
	liveFrom := minTime(r.done, closed.Add(-r.cfg.Lookback).Truncate(time.Minute))
	backlog := !owed.IsZero() && owed.Add(time.Duration(r.cfg.MaxMinutes)*time.Minute).Before(closed)
	stale := !r.redo.IsZero() || !owedStale.IsZero() && owedStale.Before(liveFrom)
	if !backlog || !owed.Before(liveFrom) || stale || r.backlogNext || !r.done.Before(closed) {
		r.backlogNext = false
		return false
	}
	r.backlogNext = true
	return true
}

// span is the minutes the pass attributes: [from, to), from the earliest minute owed a
// recomputation (owed, zero: none) at the latest, or, on a live turn, from the lookback.
func (r *Runner) span(closed, owed time.Time, live bool) (from, to time.Time) {
	from = minTime(r.done, closed.Add(-r.cfg.Lookback).Truncate(time.Minute))
	if !r.redo.IsZero() && !live {
		from = minTime(from, r.redo)
	}
	if !owed.IsZero() && !live {
		from = minTime(from, owed)
	}
	to = closed
	if n := int(to.Sub(from) / time.Minute); n > r.cfg.MaxMinutes {
		// Oldest first; what is cut off waits for the next pass (r.redo, r.done).
		to = from.Add(time.Duration(r.cfg.MaxMinutes) * time.Minute)
	}
	return from, to
}

// behind is where the owned nodes present in the pass must be recomputed from, zero when none
// is behind: the minute after a node's latest stored one when that is before the pass (from
// the first attributed minute for a node never stored), or the start of an allocation on the
// node received after the node's latest pass (its previous owner may have stopped before
// recomputing for it). Minutes within the lookback are recomputed every pass anyway.
func (r *Runner) behind(ctx context.Context, closed, from time.Time, owns func(string) bool, present []string) (time.Time, error) {
	ends, first, err := stored.NodeEnds(ctx, r.conn, closed.Add(-r.cfg.MaxRecompute).Truncate(time.Minute))
	if err != nil || first.IsZero() {
		return time.Time{}, err
	}
	var earliest, since time.Time
	owned := map[string]bool{}
	for _, n := range present {
		if !owns(n) {
			continue
		}
		owned[n] = true
		start := first // never stored: all of it
		if e, ok := ends[n]; ok {
			start = e.Last.Add(time.Minute)
			if since.IsZero() || e.Computed.Before(since) {
				since = e.Computed
			}
		}
		if start.Before(from) && (earliest.IsZero() || start.Before(earliest)) {
			earliest = start
		}
	}
	if since.IsZero() {
		return earliest, nil
	}
	// Allocations on these nodes received since the earliest of their latest passes.
	rows, err := store.ReceivedSince(ctx, r.conn, since.Truncate(time.Second))
	if err != nil {
		return time.Time{}, err
	}
	nodes, err := r.nodesOf(ctx, rows, since.Truncate(time.Second))
	if err != nil {
		return time.Time{}, err
	}
	for _, x := range rows {
		if onNodes(nodes[x.ID], func(n string) bool { return owned[n] }) && (earliest.IsZero() || x.Started.Before(earliest)) {
			earliest = x.Started
		}
	}
	return earliest, nil
}

// nodesOf is the nodes of every version of the received allocations (none read when there
// are none).
func (r *Runner) nodesOf(ctx context.Context, rows []store.Received, since time.Time) (map[string][]string, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	return stored.AllocationNodes(ctx, r.conn, since)
}

// onNodes says whether any of the nodes is owned.
func onNodes(nodes []string, owns func(string) bool) bool {
	for _, n := range nodes {
		if owns(n) {
			return true
		}
	}
	return false
}

// staleNodes are the owned nodes stored in the minute before that its report has nothing of:
// each gets a zero __unallocated__ row (stored.Minute.Stale). Without Shards (owns nil) every
// node the minute stored is taken as owned.
func staleNodes(stored []string, rep report.Report, owns func(string) bool) []string {
	var out []string
	for _, n := range stored {
		if _, ok := rep.UnallocatedByNode[n]; !ok && (owns == nil || owns(n)) {
			out = append(out, n)
		}
	}
	return out
}

// logProblems logs what is wrong with a minute's report, at most one line per kind per
// minute: the lookback computes every minute again at every pass, and an allocation left out
// or an overlap stays in every minute it touches until someone fixes it.
func (r *Runner) logProblems(ctx context.Context, now, minute time.Time, rep report.Report, violations []error) {
	for _, e := range violations {
		reason := "invariant"
		if ie := (*billing.InvariantError)(nil); errors.As(e, &ie) {
			reason += "_" + ie.Invariant
		}
		r.logs.Log(ctx, now, slog.LevelError, reason, "attribution invariant violated", "minute", minute, "err", e)
	}
	known := map[string]bool{}
	for _, n := range rep.Notes[:min(rep.Unsampled, len(rep.Notes))] { // the first notes (report.Report)
		known[n] = true
		r.logs.Log(ctx, now, slog.LevelWarn, "allocation_left_out", "allocation left out of the attribution: its target has never been sampled",
			"minute", minute, "note", n, "left_out_in_minute", rep.Unsampled)
	}
	for _, u := range rep.Unpriced {
		n := u.Note()
		known[n] = true
		r.logs.Log(ctx, now, slog.LevelWarn, "unpriced_"+u.Kind, "left out of the money: the price book lacks a GPU model or tier",
			"minute", minute, "kind", u.Kind, "name", u.Name, "note", n)
	}
	for _, o := range rep.Overlaps {
		known[o] = true
		r.logs.Log(ctx, now, slog.LevelWarn, "overlap", "allocations overlap on an instance", "minute", minute, "overlap", o, "overlaps_in_minute", len(rep.Overlaps))
	}
	for _, n := range rep.Notes {
		if !known[n] {
			r.logs.Log(ctx, now, slog.LevelWarn, "note", "attribution report note", "minute", minute, "note", n)
		}
	}
}

// resume picks up where the stored minutes end: after a restart, allocations received since
// the last stored pass are late; on a first start, the backfill covers what is there.
func (r *Runner) resume(ctx context.Context, closed time.Time) error {
	last, err := stored.LastMinute(ctx, r.conn)
	if err != nil {
		return err
	}
	if last.IsZero() {
		r.done = closed.Add(-r.cfg.Backfill).Truncate(time.Minute)
		// What is there now is covered by the backfill: take it in without recomputing.
		if r.watermark, err = store.LastReceived(ctx, r.conn); err != nil {
			return err
		}
		_, err = r.late(ctx, nil)
	} else {
		r.done = last.Add(time.Minute)
		r.watermark, err = stored.LastComputed(ctx, r.conn)
		r.watermark = r.watermark.Truncate(time.Second)
	}
	return err
}

// lateAllocations are the allocations received since the last pass that were ever on a node
// the replica owns: the earliest started_at (zero: none), their ids, and, with Shards, the
// nodes of all their versions.
type lateAllocations struct {
	Earliest time.Time
	IDs      []string
	Nodes    []string
}

// late returns the allocations received since the last pass that were ever on a node owns
// accepts (nil: every node), and moves the watermark past them all.
func (r *Runner) late(ctx context.Context, owns func(string) bool) (lateAllocations, error) {
	rows, err := store.ReceivedSince(ctx, r.conn, r.watermark)
	if err != nil {
		return lateAllocations{}, err
	}
	var nodes map[string][]string
	if owns != nil {
		if nodes, err = r.nodesOf(ctx, rows, r.watermark); err != nil {
			return lateAllocations{}, err
		}
	}
	var out lateAllocations
	var earliest time.Time
	onAny := map[string]bool{}
	next := r.watermark
	for _, x := range rows {
		if v, ok := r.seen[x.ID]; ok && v == x.Version && x.At.Equal(r.watermark) {
			continue
		}
		if x.At.After(next) {
			next = x.At
		}
		if owns != nil && !onNodes(nodes[x.ID], owns) {
			continue
		}
		if earliest.IsZero() || x.Started.Before(earliest) {
			earliest = x.Started
		}
		if !slices.Contains(out.IDs, x.ID) {
			out.IDs = append(out.IDs, x.ID)
		}
		for _, n := range nodes[x.ID] {
			onAny[n] = true
		}
	}
	out.Earliest = earliest
	out.Nodes = slices.Sorted(maps.Keys(onAny))
	seen := map[string]uint64{}
	for _, x := range rows {
		if x.At.Equal(next) {
			seen[x.ID] = x.Version
		}
	}
	r.watermark, r.seen = next, seen
	return out, nil
}

// Done is the end of the latest minute attributed.
func (r *Runner) Done() time.Time { return r.done }

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// reportDelay is the report's delay for the runner's: none (negative) when it has none.
func reportDelay(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// SetClock replaces the wall clock (tests replay simulated time).
func (r *Runner) SetClock(now func() time.Time) { r.now = now }
