package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/statement"
)

// newPricebookCmd is `slicemeter pricebook check FILE | example` (attribution/pricebook).
func newPricebookCmd(app *kingpin.Application, stdout io.Writer) command {
	f := pricebook.AddFlags(app.Command("pricebook", "Work with price books."))
	return runFunc(func(ctx context.Context, _ *slog.Logger) error {
		return pricebook.Run(ctx, f, attribution.CheckFleetPricedAt, stdout)
	})
}

// newStatementCmd is `slicemeter statement` (attribution/statement).
func newStatementCmd(app *kingpin.Application, stdout io.Writer) command {
	f := statement.AddFlags(app.Command("statement", "A tenant's statement of a billing period: one self-contained HTML page (totals, daily cost chart, line items, SLA, corrections), or PDF with headless Chromium."))
	return runFunc(func(ctx context.Context, logger *slog.Logger) error { return statement.Run(ctx, f, stdout, logger) })
}
