//go:build !exporter_only

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/focus"
	attrpricebook "github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/request"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

type reportCmd struct {
	stdout   io.Writer
	dsn      *string
	book     *pricebookFlags
	from, to *string
	step     *string
	samples  *string
	minutes  *bool
	out      *outputFlags
	presence time.Duration
}

func newReportCmd(app *kingpin.Application, stdout io.Writer) *reportCmd {
	c := app.Command("report", "Print the tenant report of a window, computed from what is in ClickHouse.")
	cmd := &reportCmd{
		stdout:  stdout,
		dsn:     dsnFlag(c),
		book:    addPricebookFlags(c),
		from:    c.Flag("from", "Window start: RFC 3339 (e.g. 2026-01-05T00:00:00Z) or a date (2026-01-05: midnight UTC).").Required().String(),
		to:      c.Flag("to", "Window end (exclusive): RFC 3339 or a date (midnight UTC); a time after now stops at now.").Required().String(),
		step:    c.Flag("step", "Cut the window into steps, one set of rows each: 1h, 1d, month or a duration such as 15m or 7d.").String(),
		samples: samplesFlag(c, "raw"),
		minutes: c.Flag("from-minutes", "Sum the minutes the attribution service stored (whole-minute windows) instead of computing from the samples.").Bool(),
		out:     addOutputFlags(c),
	}
	presenceFlag(c, &cmd.presence)
	return cmd
}

// presenceFlag sets the presence period; the service's and the reports' must be the same for
// the stored minutes to sum to the reports.
func presenceFlag(c *kingpin.CmdClause, d *time.Duration) {
	c.Flag("attribution.presence", "A GPU is capacity from each of its samples for this long (at least 1m), so exporter outages shorter "+
		"than it do not shrink the fleet's capacity (and the unallocated row), and a GPU gone is capacity for this long after its last sample.").
		Default("1h").DurationVar(d)
}

// samplesFlag chooses where sample aggregates are read from.
func samplesFlag(c *kingpin.CmdClause, def string) *string {
	return c.Flag("attribution.samples", "Read the samples (raw: exact to the sample) or the collector's rollups (rollup-1s: ~10x fewer rows; rollup-1m: ~600x, allocations inside a minute counted by their share of it).").Default(def).Enum("raw", "rollup-1s", "rollup-1m")
}

// sampleSource is the source a samplesFlag names (the flag allows only those).
func sampleSource(flag string) store.Samples {
	src, _ := store.ParseSamples(flag)
	return src
}

func (c *reportCmd) run(ctx context.Context, logger *slog.Logger) error {
	from, to, err := report.ParseWindow("--from", *c.from, "--to", *c.to)
	if err != nil {
		return usage.Wrap(err)
	}
	if err := store.CheckPresence(c.presence); err != nil {
		return usage.Errorf("--attribution.presence: %w", err)
	}
	// The request is checked (its windows counted, none built) before the price book is read;
	// its months are the book's.
	req, err := request.Parse(c.params(), from, to, time.UTC)
	if err != nil {
		return usage.Wrap(flagError(err))
	}
	book, err := c.book.load()
	if err != nil {
		return err
	}
	if n := focus.CountHours(from, to, book.Zone()); req.Format.FOCUS && n > report.MaxBuiltWindows {
		return usage.Errorf("--from and --to: %d hours of FOCUS rows; expected at most %d (export a shorter range at a time)", n, report.MaxBuiltWindows)
	}
	windows, err := report.WindowsIn(from, to, req.Step, book.Zone())
	if err != nil {
		return usage.Wrap(fmt.Errorf("--step: %w", err))
	}
	conn, err := migrations.Open(ctx, *c.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Now in whole seconds: a window_end cut at now has no nanoseconds, like window_start.
	o := attribution.Options{Samples: sampleSource(*c.samples), FromMinutes: req.FromMinutes, Neighbours: req.Neighbours(), Presence: c.presence, Lines: req.Lines(),
		Now: time.Now().Truncate(time.Second)}
	if req.Format.FOCUS {
		return c.out.focus.Write(ctx, focus.ForAttribution(conn, book, o, logger), from, to, c.stdout)
	}
	series, err := attribution.ReportSeries(ctx, conn, book, windows, o, logger)
	if err != nil {
		return err
	}
	if err := req.Format.Write(c.stdout, series, req.By); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// params are the request's parameters as the flags set them.
func (c *reportCmd) params() url.Values {
	p := url.Values{"format": {c.out.format}, "by": {c.out.by}, "step": {*c.step}, "encoding": {string(c.out.focus.FileFormat)},
		"focus_version": {string(c.out.focus.Version)}}
	if *c.minutes {
		p.Set("source", "minutes")
	}
	return p
}

// requestFlags name the request's parameters as the command's flags.
var requestFlags = map[string]string{"format": "--format", "by": "--by", "source": "--from-minutes", "step": "--step", "encoding": "--focus.file-format", "focus_version": "--focus.version"}

// flagError names a request's bad parameter by its flag.
func flagError(err error) error {
	var e *request.Error
	if errors.As(err, &e) {
		return fmt.Errorf("%s: %w", requestFlags[e.Param], e.Err)
	}
	return err
}

// pricebookFlags choose the price book: a price book file, or the one a scenario carries.
type pricebookFlags struct {
	file, scenario *string
}

func addPricebookFlags(c *kingpin.CmdClause) *pricebookFlags {
	p := &pricebookFlags{file: new(string), scenario: new(string)}
	pricebookSourceFlags(c, p.file, p.scenario)
	return p
}

// pricebookSourceFlags adds --pricebook and --scenario, the two places
// pricebook.LoadFileOrScenario reads a price book from.
func pricebookSourceFlags(c *kingpin.CmdClause, file, scenario *string) {
	c.Flag("pricebook", "Price book file (YAML: currency, prices, tiers, sla, costs).").StringVar(file)
	c.Flag("scenario", "Take the price book from this scenario file instead.").StringVar(scenario)
}

func (p *pricebookFlags) load() (*pricebook.PriceBook, error) {
	return loadBook(*p.file, *p.scenario)
}

// loadBook is the price book of --pricebook or --scenario; a missing or bad one is a usage
// error (exit 2).
func loadBook(file, scenario string) (*pricebook.PriceBook, error) {
	book, err := attrpricebook.LoadFileOrScenario(file, scenario)
	if err != nil {
		return nil, usage.Wrap(err)
	}
	return book, nil
}

// bookAndDatabase is what the commands that read stored data and price it open first: the
// price book, checked before ClickHouse is dialled, and a connection to a migrated database.
func bookAndDatabase(ctx context.Context, file, scenario, dsn string) (*pricebook.PriceBook, driver.Conn, error) {
	book, err := loadBook(file, scenario)
	if err != nil {
		return nil, nil, err
	}
	conn, err := migrations.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	return book, conn, nil
}
