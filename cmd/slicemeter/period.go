//go:build !exporter_only

package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

// periodCmd is `slicemeter period close|list|show`: the closed billing periods.
type periodCmd struct {
	stdout  io.Writer
	action  string
	dsn     *string
	book    *pricebookFlags
	month   string // close's or show's argument
	samples *string
	minutes *bool
	export  *focus.MonthlyExport
}

func newPeriodCmd(app *kingpin.Application, stdout io.Writer) *periodCmd {
	c := &periodCmd{stdout: stdout}
	p := app.Command("period", "Close billing periods (calendar months in the price book's timezone) and read them back.")
	cl := p.Command("close", "Compute a month's report once, with correction lines for closed months before it, and store it.").
		Action(func(*kingpin.ParseContext) error { c.action = "close"; return nil })
	p.Command("list", "List the closed periods: version, closed_at and totals.").Action(func(*kingpin.ParseContext) error { c.action = "list"; return nil })
	sh := p.Command("show", "Print a closed period's report as it was stored.").Action(func(*kingpin.ParseContext) error { c.action = "show"; return nil })
	c.dsn = dsnFlag(p)
	cl.Arg("month", "The period, YYYY-MM.").Required().StringVar(&c.month)
	c.book = addPricebookFlags(cl)
	c.samples = samplesFlag(cl, "raw")
	c.minutes = cl.Flag("from-minutes", "Sum the minutes the attribution service stored instead of computing from the samples.").Bool()
	c.export = addExportFlags(cl)
	sh.Arg("month", "The period, YYYY-MM.").Required().StringVar(&c.month)
	return c
}

func (c *periodCmd) run(ctx context.Context, logger *slog.Logger) error {
	var m period.Month
	if c.action != "list" {
		var err error
		if m, err = period.Parse(c.month); err != nil {
			return usage.Wrap(err)
		}
		if err := m.CheckRange("period", c.month); err != nil {
			return usage.Wrap(err)
		}
	}
	conn, err := migrations.Open(ctx, *c.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	switch c.action {
	case "list":
		return period.PrintList(ctx, conn, c.stdout)
	case "show":
		return period.PrintReport(ctx, conn, m, c.stdout)
	}
	book, err := c.book.load()
	if err != nil {
		return err
	}
	closer := period.Closer{Conn: conn, Book: book, Options: attribution.Options{Samples: sampleSource(*c.samples), FromMinutes: *c.minutes}, Export: c.export, Logger: logger}
	p, err := closer.Close(ctx, m, time.Now())
	if err != nil {
		return err
	}
	return period.WriteList(c.stdout, []period.Closed{p})
}
