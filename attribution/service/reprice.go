package service

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/period"
	attrpricebook "github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Price book changes (attribution/README.md, "Price book changes").
//
// Stored minutes carry the money of the book they were attributed with, and a period closed
// from them is corrected only where minutes were stored again (period.Closer). So at its
// first pass the runner records its book in price_books when it is not the latest recorded,
// and when the two bill something differently (attrpricebook.Differ) it attributes again the
// stored minutes from the first instant they do, through the passes' recomputation (redo),
// MaxMinutes a pass: no further back than the closed periods that the next close corrects
// (period.DefaultLookback) and the first stored minute. The re-attribution is a recomputation
// like any other (recompute.go: recorded in ClickHouse before any minute is rewritten,
// resumed by whichever runner comes next); price_books mirrors how far it came. While it runs
// the service closes no period (a close would bill part of the old prices, to be corrected in
// the next).

// adopt records the runner's book and starts the re-attribution that its change makes, or
// resumes one that a restart cut short. It runs once, after resume.
func (r *Runner) adopt(ctx context.Context) error {
	text, hash, err := r.book.Canonical()
	if err != nil {
		return err
	}
	latest, ok, err := stored.LatestBook(ctx, r.conn)
	if err != nil {
		return err
	}
	if ok && latest.Hash == hash {
		r.book0 = latest
		if latest.Pending() {
			// Its recomputation resumes by itself; one recorded before there were records
			// (or lost) is recorded again from where price_books says.
			open, err := stored.OpenRecomputations(ctx, r.conn)
			if err != nil {
				return err
			}
			for _, rec := range open {
				if rec.ID == bookRecomputation(latest) {
					return nil
				}
			}
			if err := r.recordReprice(ctx, latest, latest.Next); err != nil {
				return err
			}
			r.logger.InfoContext(ctx, "resuming the re-attribution of the stored minutes with the price book",
				"hash", hash, "from", latest.Next, "to", latest.To, "changed", latest.Reason)
		}
		return nil
	}
	now := r.now().UTC()
	rec := stored.BookRecord{Hash: hash, FirstSeen: now, Book: text, Updated: now}
	if ok && !r.done.IsZero() {
		if rec.From, rec.To, rec.Reason, err = r.repriceRange(ctx, latest); err != nil {
			return err
		}
		rec.Next = rec.From
	}
	if err := stored.RecordBook(ctx, r.conn, rec); err != nil {
		return err
	}
	r.book0 = rec
	if rec.Pending() {
		if err := r.recordReprice(ctx, rec, rec.From); err != nil {
			return err
		}
		r.logger.InfoContext(ctx, "the price book changed: the stored minutes are attributed again with it",
			"hash", hash, "previous", latest.Hash, "changed", rec.Reason, "from", rec.From, "to", rec.To,
			"minutes", int(rec.To.Sub(rec.From)/time.Minute))
	}
	return nil
}

// repriceRange is the stored minutes [from, to) that the change from the book recorded last
// bills differently, within the bound (repriceBound); from = to when none. An unfinished
// re-attribution of the last book is carried over.
func (r *Runner) repriceRange(ctx context.Context, last stored.BookRecord) (from, to time.Time, reason string, err error) {
	bound, err := r.repriceBound(ctx)
	if err != nil || bound.IsZero() { // nothing stored: nothing to attribute again
		return time.Time{}, time.Time{}, "", err
	}
	to = r.done
	from = to
	if old, err := pricebook.FromCanonical(last.Book); err != nil {
		r.logger.WarnContext(ctx, "the price book recorded last cannot be read: every stored minute within reach is attributed again", "err", err)
		from, reason = time.Time{}, "the previous book cannot be read"
	} else if d, differ := attrpricebook.Differ(old, r.book); differ {
		from, reason = d.From.Truncate(time.Minute), d.What
	}
	if last.Pending() {
		at := last.Next
		if r.cfg.Shards != nil { // as adopt resumes it
			at = last.From
		}
		from, to = minTime(from, at), maxTime(to, last.To)
		reason = strings.TrimPrefix(reason+fmt.Sprintf("; the re-attribution for %.12s was not finished", last.Hash), "; ")
	}
	if from = maxTime(from, bound); !from.Before(to) {
		return time.Time{}, time.Time{}, reason, nil
	}
	return from, to, reason, nil
}

// repriceBound is how far back a price book change is attributed again (reachBack).
func (r *Runner) repriceBound(ctx context.Context) (time.Time, error) {
	first, err := stored.FirstMinute(ctx, r.conn)
	if err != nil {
		return time.Time{}, err
	}
	closed, err := period.List(ctx, r.conn)
	if err != nil {
		return time.Time{}, err
	}
	var last *period.Month
	if len(closed) > 0 {
		last = &closed[len(closed)-1].Period
	}
	return reachBack(first, last, r.book.Zone()), nil
}

// reachBack is the earliest minute a price book change is attributed again from: the first
// stored minute (zero: none is stored), and, after the last closed period, the start of the
// oldest period that the next close corrects (period.DefaultLookback before the first open
// one): a change older than that is billed nowhere.
func reachBack(first time.Time, lastClosed *period.Month, zone *time.Location) time.Time {
	if first.IsZero() || lastClosed == nil {
		return first
	}
	oldest, _ := lastClosed.Add(1 - period.DefaultLookback).Bounds(zone)
	return maxTime(first, oldest)
}

// bookRecomputation is the id of the recomputation a book's change makes.
func bookRecomputation(b stored.BookRecord) string {
	return fmt.Sprintf("%s-%.12s-%d", stored.ReasonPriceBook, b.Hash, b.FirstSeen.UnixNano())
}

// recordReprice records the re-attribution of the book's change as a recomputation of
// [from, b.To): every node (with Shards, those with minutes stored since from).
func (r *Runner) recordReprice(ctx context.Context, b stored.BookRecord, from time.Time) error {
	rec := stored.Recomputation{ID: bookRecomputation(b), Reason: stored.ReasonPriceBook, What: fmt.Sprintf("%.12s: %s", b.Hash, b.Reason),
		From: from, To: b.To, Next: from, Updated: r.now().UTC()}
	if r.cfg.Shards != nil {
		ends, _, err := stored.NodeEnds(ctx, r.conn, from)
		if err != nil {
			return err
		}
		rec.Nodes = slices.Sorted(maps.Keys(ends))
		if len(rec.Nodes) == 0 {
			return nil // nothing stored there any more
		}
	}
	return stored.RecordRecomputation(ctx, r.conn, rec)
}

// repriced records in price_books how far the re-attribution came after a pass (open: the
// recomputations as the pass left them): where its recomputation resumes, or its end once
// it is done.
func (r *Runner) repriced(ctx context.Context, now time.Time, open []stored.Recomputation) {
	rec := r.book0
	if !rec.Pending() {
		return
	}
	next := rec.To
	for _, o := range open {
		if o.ID == bookRecomputation(rec) {
			next = minTime(next, o.To.Add(-time.Duration(o.Remaining())*time.Minute))
		}
	}
	if next.Equal(rec.Next) {
		return
	}
	rec.Next, rec.Updated = next, maxTime(now, rec.Updated.Add(time.Nanosecond))
	if err := stored.RecordBook(ctx, r.conn, rec); err != nil {
		// The next pass records it; a restart before that redoes a little more.
		r.logs.Log(ctx, now, slog.LevelWarn, "reprice_progress", "could not record how far the re-attribution with the price book came", "err", err)
		return
	}
	r.book0 = rec
	if !rec.Pending() {
		r.logger.InfoContext(ctx, "the stored minutes are attributed with the price book", "hash", rec.Hash, "from", rec.From, "to", rec.To)
	}
}

// Repricing says whether stored minutes remain to be attributed again with the price book.
func (r *Runner) Repricing() bool { return r.book0.Pending() }
