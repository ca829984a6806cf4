package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/statement"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// A fresh install answers (attribution/README.md, "A fresh install"): the service attributes
// the billing period it will close from its start (Passes.OpenFrom, a backfill the passes do
// oldest first), and until that is done a statement over minutes not attributed yet is
// computed from the collector's per-minute rollup, which bills the same (README, "Integrity of
// the bill": one bill, whatever the path).

// openFrom is Passes.OpenFrom for the service: the start of the billing period that the
// service closes next as of now (the month of now − closeAfter: the previous month while its
// grace time runs, else the current one; the current one when the service closes none), and
// never before the end of the latest closed period, whose minutes no close needs.
func openFrom(ctx context.Context, conn driver.Conn, book *pricebook.PriceBook, closeAfter time.Duration) (func(time.Time) time.Time, error) {
	closed, err := period.List(ctx, conn)
	if err != nil {
		return nil, err
	}
	var after time.Time
	if len(closed) > 0 {
		after = closed[len(closed)-1].End
	}
	zone := book.Zone()
	return func(now time.Time) time.Time {
		start, _ := period.Of(now.Add(-closeAfter), zone).Bounds(zone)
		if start.Before(after) {
			return after
		}
		return start
	}, nil
}

// statementSource is the API's statement source: the stored minutes up to the last minute the
// passes attributed (the open period's statement bills to there), and, for a report whose
// minutes are not all attributed yet, the per-minute rollup with the same horizon.
func (s *service) statementSource() statement.Source {
	src := statement.DatabaseSource(s.conn, s.cfg.Book, true, s.logNotes)
	src.Report = func(ctx context.Context, from, to time.Time, lines bool) (report.Report, error) {
		o := attribution.Options{From: from, To: to, FromMinutes: true, Lines: lines, Presence: s.cfg.Presence, Delay: reportDelay(s.cfg.Delay)}
		if done := s.runner.Done(); !done.IsZero() && time.Since(done) < s.cfg.Delay+2*s.cfg.Interval+time.Minute {
			// Billed to where the passes are (a pass behind now at most): the minutes after
			// are not attributed yet. Further behind (a backfill), to now, from the rollup.
			o.Now, o.Delay = done, -1
		}
		res, err := attribution.Report(ctx, s.conn, s.cfg.Book, o)
		if errors.Is(err, stored.ErrNotAttributed) {
			s.logs.Log(ctx, time.Now(), slog.LevelInfo, "statement_from_rollup", "a statement's window is not all attributed yet: computed from the per-minute rollup",
				"from", from, "to", to, "reason", err)
			o.FromMinutes, o.Samples = false, store.MinuteRollup
			res, err = attribution.Report(ctx, s.conn, s.cfg.Book, o)
		}
		if lines {
			s.logNotes(ctx, res.Report)
		}
		return res.Report, err
	}
	return src
}
