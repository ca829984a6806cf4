package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

type reportCmd struct {
	stdout   io.Writer
	dsn      *string
	book     *pricebookFlags
	from, to *string
	format   *string
}

func newReportCmd(app *kingpin.Application, stdout io.Writer) *reportCmd {
	c := app.Command("report", "Print the tenant report of a window, computed from what is in ClickHouse.")
	return &reportCmd{
		stdout: stdout,
		dsn:    dsnFlag(c),
		book:   addPricebookFlags(c),
		from:   c.Flag("from", "Window start, RFC 3339 (e.g. 2026-01-05T00:00:00Z).").Required().String(),
		to:     c.Flag("to", "Window end (exclusive), RFC 3339.").Required().String(),
		format: c.Flag("format", "Output format.").Default("csv").Enum("csv", "json"),
	}
}

func (c *reportCmd) run(ctx context.Context, _ *slog.Logger) error {
	from, err := parseTime("--from", *c.from)
	if err != nil {
		return err
	}
	to, err := parseTime("--to", *c.to)
	if err != nil {
		return err
	}
	if !to.After(from) {
		return usage("--to (%s) must be after --from (%s)", *c.to, *c.from)
	}
	book, err := c.book.load()
	if err != nil {
		return err
	}
	conn, err := chconn.Open(ctx, *c.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	rep, err := attribution.Compute(ctx, conn, from, to, book)
	if err != nil {
		return fmt.Errorf("attributing %s to %s: %w", *c.from, *c.to, err)
	}
	return writeReport(c.stdout, rep, *c.format)
}

func parseTime(flag, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usage("%s %q: expected an RFC 3339 time such as 2026-01-05T00:00:00Z", flag, s)
	}
	return t.UTC(), nil
}

func writeReport(w io.Writer, rep report.Report, format string) error {
	f, err := report.ParseFormat(format)
	if err != nil {
		return usageError{err}
	}
	if err := rep.Write(w, f); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// pricebookFlags choose the price book: a price book file, or the one a scenario carries.
type pricebookFlags struct {
	file, scenario *string
}

func addPricebookFlags(c *kingpin.CmdClause) *pricebookFlags {
	return &pricebookFlags{
		file:     c.Flag("pricebook", "Price book file (YAML: currency, prices, tiers, sla).").String(),
		scenario: c.Flag("scenario", "Take the price book from this scenario file instead.").String(),
	}
}

func (p *pricebookFlags) load() (*pricebook.PriceBook, error) {
	switch {
	case *p.file != "" && *p.scenario != "":
		return nil, usage("give --pricebook or --scenario, not both")
	case *p.file != "":
		book, err := pricebook.Load(*p.file)
		if err != nil {
			return nil, usageError{err}
		}
		return book, nil
	case *p.scenario != "":
		sc, err := scenario.Load(*p.scenario)
		if err != nil {
			return nil, usageError{err}
		}
		return pricebook.FromScenario(sc), nil
	default:
		return nil, usage("a price book is required: --pricebook FILE or --scenario FILE")
	}
}
