package statement

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/period"
	attrpricebook "github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Flags are `slicemeter statement`'s flags.
type Flags struct {
	DSN, Pricebook, Scenario string
	Tenant, Period           string
	Format, Output           string
	FromMinutes              bool
}

// AddFlags adds the statement command's flags to c.
func AddFlags(c *kingpin.CmdClause) *Flags {
	f := &Flags{}
	migrations.DSNFlag(c, &f.DSN)
	attrpricebook.SourceFlags(c, &f.Pricebook, &f.Scenario)
	c.Flag("tenant", "The tenant whose statement to render.").Required().StringVar(&f.Tenant)
	c.Flag("period", "The billing period: a calendar month YYYY-MM in the price book's timezone.").Required().StringVar(&f.Period)
	c.Flag("format", "html: one self-contained page; pdf: that page printed on A4 by headless Chromium.").Default("html").EnumVar(&f.Format, "html", "pdf")
	c.Flag("output", "Write to this file instead of standard output (required for pdf).").Short('o').StringVar(&f.Output)
	c.Flag("from-minutes", "Sum the minutes the attribution service stored instead of computing from the samples (much faster for a month).").BoolVar(&f.FromMinutes)
	return f
}

// Run is `slicemeter statement`: the statement from what ClickHouse stores, on w or in the
// output file.
func Run(ctx context.Context, f *Flags, w io.Writer, logger *slog.Logger) error {
	m, err := period.Parse(f.Period)
	if err != nil {
		return usage.Errorf("--period: %w", err)
	}
	if err := m.CheckRange("--period", f.Period); err != nil {
		return usage.Wrap(err)
	}
	if f.Format == "pdf" && f.Output == "" {
		return usage.Errorf("--format pdf: give the PDF file with -o FILE")
	}
	if f.Format == "pdf" {
		if _, err := Chromium(); err != nil {
			return err
		}
	}
	book, err := attrpricebook.LoadFileOrScenario(f.Pricebook, f.Scenario)
	if err != nil {
		return usage.Wrap(err)
	}
	conn, err := migrations.Open(ctx, f.DSN)
	if err != nil {
		return err
	}
	defer conn.Close()
	logNotes := func(ctx context.Context, rep report.Report) { attribution.LogNotes(ctx, logger, rep) }
	st, err := Build(ctx, DatabaseSource(conn, book, f.FromMinutes, logNotes), f.Tenant, m, time.Now())
	if err != nil {
		return err
	}
	var page bytes.Buffer
	if err := Render(&page, st); err != nil {
		return err
	}
	switch {
	case f.Format == "pdf":
		return writePDF(ctx, page.Bytes(), f.Output)
	case f.Output != "":
		if err := os.WriteFile(f.Output, page.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write the statement: %w", err)
		}
		return nil
	default:
		_, err := page.WriteTo(w)
		return err
	}
}

func writePDF(ctx context.Context, page []byte, out string) error {
	dir, err := os.MkdirTemp("", "slicemeter-statement-")
	if err != nil {
		return fmt.Errorf("print the statement: %w", err)
	}
	defer os.RemoveAll(dir)
	html := filepath.Join(dir, "statement.html")
	if err := os.WriteFile(html, page, 0o600); err != nil {
		return fmt.Errorf("print the statement: %w", err)
	}
	return PDF(ctx, html, out)
}

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
