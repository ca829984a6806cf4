package service

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// Recomputations that survive a restart (attribution/README.md, "Recomputation and holes").
//
// What makes stored minutes stale (allocations received late or changed) and the holes found
// in the stored minutes are recorded in ClickHouse (stored.Recomputation) before any minute is
// rewritten. Every pass reads the records not done, starts from the earliest minute one of
// them still owes the nodes this replica attributes, and advances each record once the pass's
// minutes are stored: killed in between, the next runner does those minutes again. With
// several replicas a record names its nodes and each replica advances its own, so that
// whichever replica owns a node after a rebalance finishes it; a record is done once all of
// its nodes are.

// maxWhat bounds the allocations a record names (for logs: the nodes and times are what count).
const maxWhat = 20

// recordLate records the recomputation that allocations received late make: the stored minutes
// from the earliest start among them (no further back than MaxRecompute) to the end of the
// stored minutes. What is after that is attributed fresh anyway.
func (r *Runner) recordLate(ctx context.Context, late lateAllocations, closed, now time.Time) error {
	if late.Earliest.IsZero() {
		return nil
	}
	r.coldStarts.Forget() // their requested_at or target may have changed: searched again
	from := maxTime(late.Earliest.Truncate(time.Minute), closed.Add(-r.cfg.MaxRecompute).Truncate(time.Minute))
	if !from.Before(r.done) {
		return nil
	}
	what := late.IDs
	if len(what) > maxWhat {
		what = append(what[:maxWhat:maxWhat], fmt.Sprintf("and %d more", len(late.IDs)-maxWhat))
	}
	rec := stored.Recomputation{ID: recordID(stored.ReasonAllocation, now), Reason: stored.ReasonAllocation, What: strings.Join(what, ","),
		From: from, To: r.done, Next: from, Updated: now}
	if r.cfg.Shards != nil {
		rec.Nodes = late.Nodes
	}
	if err := stored.RecordRecomputation(ctx, r.conn, rec); err != nil {
		return err
	}
	r.logger.InfoContext(ctx, "allocations received late: the stored minutes are attributed again", "id", rec.ID, "from", rec.From, "to", rec.To,
		"minutes", int(rec.To.Sub(rec.From)/time.Minute), "allocations", rec.What)
	return nil
}

// recordID names a record: its reason and when it was made (ns, unique enough per replica;
// two replicas recording the same change make two records, each done by the same passes).
func recordID(reason string, now time.Time) string {
	return fmt.Sprintf("%s-%d", reason, now.UnixNano())
}

// findHoles records a recomputation for each run of minutes with no stored pass between the
// first attributed minute (no further back than MaxRecompute) and the end of the stored
// minutes, at most every HoleScan (the first pass always), unless a record owes it already.
func (r *Runner) findHoles(ctx context.Context, closed, now time.Time, owns func(string) bool) error {
	every := r.cfg.HoleScan
	if every <= 0 {
		every = DefaultHoleScan
	}
	if !r.holes.IsZero() && now.Sub(r.holes) < every {
		return nil
	}
	first, err := stored.FirstMinute(ctx, r.conn)
	if err != nil || first.IsZero() {
		return err
	}
	from := maxTime(first, closed.Add(-r.cfg.MaxRecompute).Truncate(time.Minute))
	runs, err := stored.MissingMinutes(ctx, r.conn, from, r.done)
	if err != nil {
		return err
	}
	r.holes = now
	if len(runs) == 0 {
		return nil
	}
	open, err := stored.OpenRecomputations(ctx, r.conn)
	if err != nil {
		return err
	}
	for i, run := range runs {
		if owedAlready(open, run) {
			continue
		}
		at := now.Add(time.Duration(i)) // ids apart
		rec := stored.Recomputation{ID: recordID(stored.ReasonMissing, at), Reason: stored.ReasonMissing,
			What: fmt.Sprintf("%d minutes with no stored pass", int(run.To.Sub(run.From)/time.Minute)), From: run.From, To: run.To, Next: run.From, Updated: now}
		if r.cfg.Shards != nil {
			// Every node: those with minutes stored around the hole, whichever replica owns them.
			ends, _, err := stored.NodeEnds(ctx, r.conn, run.From.Add(-time.Hour))
			if err != nil {
				return err
			}
			for n := range ends {
				rec.Nodes = append(rec.Nodes, n)
			}
		}
		if err := stored.RecordRecomputation(ctx, r.conn, rec); err != nil {
			return err
		}
		r.logger.WarnContext(ctx, "stored minutes with no stored pass: they are attributed again", "id", rec.ID, "from", run.From, "to", run.To,
			"minutes", int(run.To.Sub(run.From)/time.Minute))
	}
	return nil
}

// owedAlready says whether a record not done of minutes with no stored pass (holes, a
// backfill, a period's close) covers the run.
func owedAlready(open []stored.Recomputation, run stored.Run) bool {
	for _, rec := range open {
		if (rec.Reason == stored.ReasonMissing || stored.FirstAttribution(rec.Reason)) && !rec.From.After(run.From) && !rec.To.Before(run.To) {
			return true
		}
	}
	return false
}

// recordBackfill records, once (at the first pass), the minutes from OpenFrom (no further back
// than MaxRecompute) to the first stored minute (to where the passes begin, with none stored)
// that no pass stored, as a recomputation of reason backfill: a fresh install attributes the
// billing period it will close, and a service that was down or started late catches up.
func (r *Runner) recordBackfill(ctx context.Context, closed, now time.Time) error {
	if r.backfilled || r.cfg.OpenFrom == nil {
		return nil
	}
	from := maxTime(r.cfg.OpenFrom(now).Truncate(time.Minute), closed.Add(-r.cfg.MaxRecompute).Truncate(time.Minute))
	to, err := stored.FirstMinute(ctx, r.conn)
	if err != nil {
		return err
	}
	if to.IsZero() || r.done.Before(to) {
		to = r.done
	}
	n, err := r.Owe(ctx, from, to, stored.ReasonBackfill, "the open billing period before the first stored minute", now)
	if err != nil {
		return fmt.Errorf("record the backfill of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	r.backfilled = true
	if n > 0 {
		r.logger.InfoContext(ctx, "attributing the minutes of the open billing period that were never attributed, oldest first; progress is logged once a minute",
			"from", from, "to", to, "minutes", n, "max_minutes_per_pass", r.cfg.MaxMinutes)
	}
	return nil
}

// Owe records the minutes of [from, to) that no pass stored, and no record owes already, as
// recomputations of reason (stored.ReasonBackfill, stored.ReasonPeriodClose), so that the
// passes attribute them, oldest first, and a restart resumes them. It returns how many minutes
// it recorded. The service calls it for a billing period whose close needs minutes nobody
// would attribute otherwise (before the first stored minute). Not safe during a pass.
func (r *Runner) Owe(ctx context.Context, from, to time.Time, reason, what string, now time.Time) (int, error) {
	runs, err := stored.MissingMinutes(ctx, r.conn, from, to)
	if err != nil || len(runs) == 0 {
		return 0, err
	}
	open, err := stored.OpenRecomputations(ctx, r.conn)
	if err != nil {
		return 0, err
	}
	n := 0
	for i, run := range runs {
		if owedAlready(open, run) {
			continue
		}
		rec := stored.Recomputation{ID: recordID(reason, now.Add(time.Duration(i))), Reason: reason, What: what,
			From: run.From, To: run.To, Next: run.From, Updated: now}
		if r.cfg.Shards != nil {
			// The nodes present then, whichever replica owns them: each replica advances its own.
			period := attribution.Options{Presence: r.cfg.Presence}.PresencePeriod()
			p, err := store.ReadPresence(ctx, r.conn, r.cfg.Samples, billing.Interval{Start: run.From.UnixNano(), End: run.To.UnixNano()}, period)
			if err != nil {
				return n, err
			}
			rec.Nodes = p.Nodes()
		}
		if err := stored.RecordRecomputation(ctx, r.conn, rec); err != nil {
			return n, err
		}
		n += int(run.To.Sub(run.From) / time.Minute)
	}
	return n, nil
}

// owedFrom is the earliest minute that a record not done still owes the nodes the replica
// attributes (owns nil: every node), zero when none does.
func owedFrom(open []stored.Recomputation, owns func(string) bool) time.Time {
	var at time.Time
	for _, rec := range open {
		next, ok := rec.NextFor(owns)
		if ok && (at.IsZero() || next.Before(at)) {
			at = next
		}
	}
	return at
}

// advance records how far the records came once a pass stored the minutes [from, reached) of
// the nodes it owns: a record (or node of one) whose next minute was among them comes to
// reached (to its end at most), and is done at its end. It also counts what is still owed.
func (r *Runner) advance(ctx context.Context, open []stored.Recomputation, from, reached time.Time, owns func(string) bool, now time.Time) error {
	for i := range open {
		rec := &open[i]
		if rec.Done() {
			continue
		}
		next := minTime(reached, rec.To)
		if owns == nil || len(rec.Nodes) == 0 {
			at := maxTime(rec.From, rec.Next)
			if at.Before(from) || !at.Before(next) {
				continue
			}
			rec.Next, rec.Updated = next, maxTime(now, rec.Updated.Add(time.Nanosecond))
			if err := stored.RecordRecomputation(ctx, r.conn, *rec); err != nil {
				return err
			}
		} else {
			var moved []string
			for _, n := range rec.Nodes {
				if at := rec.NodeNext(n); owns(n) && !at.Before(from) && at.Before(next) {
					moved = append(moved, n)
				}
			}
			if len(moved) == 0 {
				continue
			}
			rec.Updated = maxTime(now, rec.Updated.Add(time.Nanosecond))
			if err := stored.RecordProgress(ctx, r.conn, *rec, moved, next); err != nil {
				return err
			}
			if rec.Progress == nil {
				rec.Progress = map[string]time.Time{}
			}
			for _, n := range moved {
				rec.Progress[n] = next
			}
			if rec.Done() {
				rec.Next = rec.To
				if err := stored.RecordRecomputation(ctx, r.conn, *rec); err != nil {
					return err
				}
			}
		}
		if rec.Done() {
			r.logger.InfoContext(ctx, "stored minutes attributed again", "id", rec.ID, "reason", rec.Reason, "from", rec.From, "to", rec.To, "what", rec.What)
		}
	}
	r.count(ctx, open, now)
	return nil
}

// count sets what is still owed (Owed) from the records.
func (r *Runner) count(ctx context.Context, open []stored.Recomputation, now time.Time) {
	var stale, missing, backfill int
	for _, rec := range open {
		switch {
		case rec.Reason == stored.ReasonMissing:
			missing += rec.Remaining()
		case stored.FirstAttribution(rec.Reason):
			backfill += rec.Remaining()
		default:
			stale += rec.Remaining()
		}
	}
	r.stale.Store(int64(stale))
	r.absent.Store(int64(missing))
	r.backfill.Store(int64(backfill))
	if stale+missing+backfill > 0 {
		r.logs.Log(ctx, now, slog.LevelInfo, "recomputation_owed", "minutes still to attribute (again)", "stale_minutes", stale, "missing_minutes", missing,
			"backfill_minutes", backfill)
	}
}

// Owed is, after the latest pass, how many stored minutes remain to attribute again (stale)
// and how many have no stored pass (missing), of every record not done.
func (r *Runner) Owed() (stale, missing int) { return int(r.stale.Load()), int(r.absent.Load()) }

// Backfill is, after the latest pass, how many minutes never attributed remain to attribute
// for the first time (the open period's backfill, the minutes a period's close needs).
func (r *Runner) Backfill() int { return int(r.backfill.Load()) }

// watchOwed exports Owed as gauges in seconds (Prometheus' base unit), 0 from the start.
func watchOwed(reg prometheus.Registerer, r *Runner) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "slicemeter_attribution_stale_seconds",
		Help: "Stored attribution still to be attributed again (allocations received late or changed, a price book change), recorded in ClickHouse, in seconds (whole minutes).",
	}, func() float64 { s, _ := r.Owed(); return float64(s) * 60 }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "slicemeter_attribution_missing_seconds",
		Help: "Time between the first and the latest attributed minute with no stored pass (holes), still to be attributed, in seconds (whole minutes).",
	}, func() float64 { _, m := r.Owed(); return float64(m) * 60 }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "slicemeter_attribution_backfill_seconds",
		Help: "Time never attributed that the service is attributing for the first time (the open billing period at start, the minutes a billing period's close needs), in seconds (whole minutes).",
	}, func() float64 { return float64(r.Backfill()) * 60 }))
}
