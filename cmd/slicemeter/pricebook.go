//go:build !exporter_only

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
	f := addPricebookCommands(app.Command("pricebook", "Work with price books."))
	return runFunc(func(ctx context.Context, _ *slog.Logger) error {
		return pricebook.Run(ctx, f, attribution.CheckFleetPricedAt, stdout)
	})
}

// addPricebookCommands adds the pricebook subcommands (check, example) to c.
func addPricebookCommands(c *kingpin.CmdClause) *pricebook.Options {
	f := &pricebook.Options{}
	check := c.Command("check", "Validate a price book and list what it bills how; with --clickhouse.dsn also check that it prices every GPU model sampled recently and knows every tier of the allocations billed since (reports attribute what it lacks as unpriced).").
		Action(func(*kingpin.ParseContext) error { f.Sub = "check"; return nil })
	check.Arg("file", "Price book (YAML).").Required().StringVar(&f.File)
	check.Flag("clickhouse.dsn", "Also check the fleet's GPU models in this ClickHouse (native protocol DSN).").StringVar(&f.DSN)
	check.Flag("fleet.since", "How far back samples count as the fleet.").Default("24h").DurationVar(&f.Since)
	c.Command("example", "Print a commented starter price book (attribution/pricebook/README.md describes every field).").
		Action(func(*kingpin.ParseContext) error { f.Sub = "example"; return nil })
	return f
}
