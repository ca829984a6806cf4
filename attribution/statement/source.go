package statement

import (
	"bytes"
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// DatabaseSource is the statement's source over ClickHouse: the attribution's reports (from
// the samples, or the stored minutes) and the periods' closes. logNotes gets the notes
// (unpriced, unsampled, overlapping allocations), which a statement has no place for, of the
// period's report, the one with lines: the days' reports would repeat them.
func DatabaseSource(conn driver.Conn, book *pricebook.PriceBook, fromMinutes bool, logNotes func(context.Context, report.Report)) Source {
	return Source{
		Book: book,
		Report: func(ctx context.Context, from, to time.Time, lines bool) (report.Report, error) {
			res, err := attribution.Report(ctx, conn, book, attribution.Options{From: from, To: to, FromMinutes: fromMinutes, Lines: lines})
			if lines {
				logNotes(ctx, res.Report)
			}
			return res.Report, err
		},
		// From samples_1m, as `slicemeter advise` reads by default: a month of them is cheap.
		Advice: func(ctx context.Context, tenant string, from, to time.Time) (advice.Result, error) {
			return advice.Compute(ctx, conn, book, advice.Options{From: from, To: to, Samples: store.MinuteRollup,
				Headroom: advice.DefaultHeadroom, MinMeasured: advice.DefaultMinMeasured, Tenants: []string{tenant}})
		},
		Closes: func(ctx context.Context, m period.Month) (period.Closed, []period.Line, bool, error) {
			c, ok, err := period.Get(ctx, conn, m)
			if err != nil || !ok {
				return c, nil, ok, err
			}
			lines, err := period.Lines(ctx, conn, m)
			return c, lines, true, err
		},
	}
}

// Page builds and renders the statement: the API's Statementer over a Source.
func Page(src Source) func(ctx context.Context, tenant string, m period.Month) ([]byte, error) {
	return func(ctx context.Context, tenant string, m period.Month) ([]byte, error) {
		st, err := Build(ctx, src, tenant, m, time.Now())
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		err = Render(&b, st)
		return b.Bytes(), err
	}
}
