//go:build !exporter_only

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/statement"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// statementFlags are `slicemeter statement`'s flags.
type statementFlags struct {
	DSN, Pricebook, Scenario string
	Tenant, Period           string
	Format, Output           string
	FromMinutes              bool
}

// newStatementCmd is `slicemeter statement` (attribution/statement).
func newStatementCmd(app *kingpin.Application, stdout io.Writer) command {
	f := addStatementFlags(app.Command("statement", "A tenant's statement of a billing period: one self-contained HTML page (totals, daily cost chart, line items, SLA, corrections), or PDF with headless Chromium."))
	return runFunc(func(ctx context.Context, logger *slog.Logger) error { return f.run(ctx, stdout, logger) })
}

func addStatementFlags(c *kingpin.CmdClause) *statementFlags {
	f := &statementFlags{}
	dsnFlagVar(c, &f.DSN)
	pricebookSourceFlags(c, &f.Pricebook, &f.Scenario)
	c.Flag("tenant", "The tenant whose statement to render.").Required().StringVar(&f.Tenant)
	c.Flag("period", "The billing period: a calendar month YYYY-MM in the price book's timezone.").Required().StringVar(&f.Period)
	c.Flag("format", "html: one self-contained page; pdf: that page printed on A4 by headless Chromium.").Default("html").EnumVar(&f.Format, "html", "pdf")
	c.Flag("output", "Write to this file instead of standard output (required for pdf).").Short('o').StringVar(&f.Output)
	c.Flag("from-minutes", "Sum the minutes the attribution service stored instead of computing from the samples (much faster for a month).").BoolVar(&f.FromMinutes)
	return f
}

// run writes the statement from what ClickHouse stores, on w or in the output file.
func (f *statementFlags) run(ctx context.Context, w io.Writer, logger *slog.Logger) error {
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
		if _, err := statement.Chromium(); err != nil {
			return err
		}
	}
	book, conn, err := bookAndDatabase(ctx, f.Pricebook, f.Scenario, f.DSN)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := statement.CheckTenant(ctx, conn, book, f.Tenant, m); err != nil {
		return err
	}
	logNotes := func(ctx context.Context, rep report.Report) { attribution.LogNotes(ctx, logger, rep) }
	st, err := statement.Build(ctx, statement.DatabaseSource(conn, book, f.FromMinutes, logNotes), f.Tenant, m, time.Now())
	if err != nil {
		return err
	}
	var page bytes.Buffer
	if err := statement.Render(&page, st); err != nil {
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
	return statement.PDF(ctx, html, out)
}
