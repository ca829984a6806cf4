package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
)

// newPricebookCmd is `slicemeter pricebook check FILE | example` (attribution/pricebook).
func newPricebookCmd(app *kingpin.Application, stdout io.Writer) command {
	f := pricebook.AddFlags(app.Command("pricebook", "Work with price books."))
	return runFunc(func(ctx context.Context, _ *slog.Logger) error {
		return pricebook.Run(ctx, f, attribution.CheckFleetPricedAt, stdout)
	})
}
