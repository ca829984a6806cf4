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
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

// pricebookCmd is `slicemeter pricebook check FILE`: validate a price book and, with a
// ClickHouse DSN, that it prices every GPU model of the fleet.
type pricebookCmd struct {
	stdout io.Writer
	file   *string
	dsn    *string
	since  *time.Duration
}

func newPricebookCmd(app *kingpin.Application, stdout io.Writer) *pricebookCmd {
	c := app.Command("pricebook", "Work with price books.")
	check := c.Command("check", "Validate a price book; with --clickhouse.dsn also check that it prices every GPU model sampled recently and knows every tier of the allocations billed since (reports attribute what it lacks as unpriced).")
	return &pricebookCmd{
		stdout: stdout,
		file:   check.Arg("file", "Price book (YAML).").Required().String(),
		dsn:    check.Flag("clickhouse.dsn", "Also check the fleet's GPU models in this ClickHouse (native protocol DSN).").String(),
		since:  check.Flag("fleet.since", "How far back samples count as the fleet.").Default("24h").Duration(),
	}
}

func (c *pricebookCmd) run(ctx context.Context, _ *slog.Logger) error {
	book, err := pricebook.Load(*c.file)
	if err != nil {
		return usage.Wrap(err)
	}
	if *c.dsn != "" {
		conn, err := migrations.Open(ctx, *c.dsn)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := attribution.CheckFleetPriced(ctx, conn, book, *c.since); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(c.stdout, "%s: ok: %s, %d GPU models, %d tiers, %d contract prices, %d effective-dated changes\n",
		*c.file, book.Currency, len(book.Prices), len(book.Tiers), book.ContractPrices(), len(book.Changes))
	return err
}
