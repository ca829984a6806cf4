package service

import (
	"context"
	"log/slog"
	"time"
)

// Progress lines: while the service catches up (a backfill, a restart after a while, a
// recomputation that rewinds it), one line every ProgressEvery says how far it came and how
// far it still has to go; when it is caught up, one line says so with the counts, and then one
// line every HeartbeatEvery sums up the passes, so that the log of a healthy service is not
// silent for hours.
const (
	ProgressEvery  = 30 * time.Second
	HeartbeatEvery = 10 * time.Minute
)

// progress turns the passes into those lines. Not safe for concurrent use: the service's loop
// owns it.
type progress struct {
	logger *slog.Logger

	started           bool      // the first pass was logged
	behind            bool      // catching up, since since
	since, last       time.Time // the catch-up's start; the last line
	fresh, recomputed int       // minutes since the last line
	passes            int       // passes since the last line
	caughtF, caughtR  int       // minutes of the catch-up so far
	initial           int       // of which the pass that found the service behind did
}

// pass records one pass at now: p is what it did, closed the latest closed minute's end (what
// the service has to reach).
func (pr *progress) pass(ctx context.Context, now time.Time, p Pass, err error, closed time.Time) {
	if err != nil || p.Done.IsZero() {
		return // failures are logged (once a minute) where they happen
	}
	pr.fresh += p.Fresh
	pr.recomputed += p.Recomputed
	pr.passes++
	if pr.behind {
		pr.caughtF += p.Fresh
		pr.caughtR += p.Recomputed
	}
	left := max(0, int(closed.Sub(p.Done)/time.Minute))
	switch {
	case !pr.started:
		pr.started = true
		pr.logger.InfoContext(ctx, "attribution: first pass done", "from", p.From, "to", p.To, "fresh_minutes", p.Fresh,
			"recomputed_minutes", p.Recomputed, "done_up_to", p.Done, "minutes_behind", left)
		pr.startCatchUp(now, left, p)
		pr.reset(now)
	case !pr.behind && left > 0:
		pr.startCatchUp(now, left, p)
		pr.logger.InfoContext(ctx, "attribution: catching up", "done_up_to", p.Done, "minutes_behind", left)
		pr.reset(now)
	case pr.behind && left == 0:
		pr.logger.InfoContext(ctx, "attribution: caught up", "fresh_minutes", pr.caughtF, "recomputed_minutes", pr.caughtR,
			"done_up_to", p.Done, "took", now.Sub(pr.since).Round(time.Second))
		pr.behind = false
		pr.reset(now)
	case pr.behind && now.Sub(pr.last) >= ProgressEvery:
		elapsed := now.Sub(pr.since)
		attrs := []any{"fresh_minutes", pr.caughtF, "recomputed_minutes", pr.caughtR, "done_up_to", p.Done, "minutes_behind", left,
			"elapsed", elapsed.Round(time.Second)}
		if done := pr.caughtF + pr.caughtR - pr.initial; done > 0 && elapsed > 0 {
			perSecond := float64(done) / elapsed.Seconds()
			attrs = append(attrs, "eta", time.Duration(float64(left)/perSecond*float64(time.Second)).Round(time.Second))
		}
		pr.logger.InfoContext(ctx, "attribution: catching up", attrs...)
		pr.reset(now)
	case !pr.behind && now.Sub(pr.last) >= HeartbeatEvery:
		pr.logger.InfoContext(ctx, "attribution: passes", "passes", pr.passes, "fresh_minutes", pr.fresh, "recomputed_minutes", pr.recomputed,
			"done_up_to", p.Done, "since", pr.last)
		pr.reset(now)
	}
}

// startCatchUp marks the service behind by left minutes from now on (not behind: nothing).
func (pr *progress) startCatchUp(now time.Time, left int, p Pass) {
	if left == 0 {
		return
	}
	pr.behind, pr.since = true, now
	pr.caughtF, pr.caughtR = p.Fresh, p.Recomputed
	pr.initial = p.Fresh + p.Recomputed
}

// reset starts the counts of the next line at now.
func (pr *progress) reset(now time.Time) {
	pr.last, pr.fresh, pr.recomputed, pr.passes = now, 0, 0, 0
}
