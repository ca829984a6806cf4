//go:build !exporter_only

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// allocationsCmd is `slicemeter allocations import FILE`: allocations from a CSV or JSON file
// into ClickHouse, all or none.
type allocationsCmd struct {
	stdout io.Writer
	dsn    *string
	file   *string
	book   *string
	moves  *bool
}

func newAllocationsCmd(app *kingpin.Application, stdout io.Writer) *allocationsCmd {
	c := app.Command("allocations", "Manage tenants' allocations.")
	imp := c.Command("import", "Import allocations from a CSV (header: "+strings.Join(allocations.Columns, ",")+") or JSON file; all or none.")
	return &allocationsCmd{
		stdout: stdout,
		dsn:    dsnFlag(imp),
		file:   imp.Arg("file", "CSV (.csv) or JSON file of allocations.").Required().String(),
		book:   imp.Flag("pricebook", "Price book file: refuse allocations at a tier it lacks (they could not be priced).").String(),
		moves:  imp.Flag("allow-tenant-moves", "Store allocations that move a stored one to another tenant (refused without: over HTTP only an operator may).").Bool(),
	}
}

func (c *allocationsCmd) run(ctx context.Context, logger *slog.Logger) error {
	data, err := os.ReadFile(*c.file)
	if err != nil {
		return usage.Errorf("allocations file: %v", err)
	}
	var tiers map[string]float64 // nil: any tier
	if *c.book != "" {
		book, err := pricebook.Load(*c.book)
		if err != nil {
			return usage.Wrap(err)
		}
		tiers = book.Tiers
	}
	allocs, lines, err := allocations.DecodeLines(*c.file, data, tiers)
	if err != nil {
		return usage.Wrap(err)
	}
	conn, err := migrations.Open(ctx, *c.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := allocations.NewStore(conn).PutChecked(ctx, allocations.ImportActor(*c.file), allocs, allocations.ImportCheck(allocs, *c.moves))
	if errors.Is(err, allocations.ErrRefused) {
		return usage.Wrap(allocations.AtLine(*c.file, lines, err))
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", *c.file, err)
	}
	// One line however many: a bulk import may name thousands of instances not sampled yet.
	if n := len(res.Unseen); n > 0 {
		logger.Warn("allocations for instances not seen in any sample yet", "targets", n, "first", res.Unseen[:min(n, 10)])
	}
	_, err = fmt.Fprintf(c.stdout, "%s: %d allocations stored, %d unchanged, %d on instances not seen yet\n",
		*c.file, len(res.Stored), len(res.Unchanged), len(res.Unseen))
	return err
}
