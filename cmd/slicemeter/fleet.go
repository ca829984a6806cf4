//go:build !exporter_only

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// fleetFlags are `slicemeter fleet`'s flags.
type fleetFlags struct {
	DSN         string
	Pricebook   string
	Scenario    string
	From, To    string
	By          string
	Format      string
	Presence    time.Duration
	TenantLimit int
}

// newFleetCmd is `slicemeter fleet`.
func newFleetCmd(app *kingpin.Application, stdout io.Writer) command {
	f := addFleetFlags(app.Command("fleet", "Print the fleet's economics over a window (utilization, memory, margin, blast radius, fragmentation, energy)."))
	return runFunc(func(ctx context.Context, logger *slog.Logger) error { return f.run(ctx, stdout, logger) })
}

// tenantLimitFlag adds --fleet.max-tenants-per-host, into limit (the fleet command's and the
// attribution service's, whose gauges carry it for the alert).
func tenantLimitFlag(c *kingpin.CmdClause, limit *int) {
	c.Flag("fleet.max-tenants-per-host", "The most tenants one host should carry (the blast radius of a host failure); more is reported and alerted on.").
		Default(strconv.Itoa(fleet.DefaultMaxTenantsPerHost)).IntVar(limit)
}

func addFleetFlags(c *kingpin.CmdClause) *fleetFlags {
	f := &fleetFlags{}
	dsnFlagVar(c, &f.DSN)
	pricebookSourceFlags(c, &f.Pricebook, &f.Scenario)
	c.Flag("from", "Window start, a whole minute: RFC 3339 (e.g. 2026-01-05T00:00:00Z) or a date (2026-01-05: midnight UTC).").Required().StringVar(&f.From)
	c.Flag("to", "Window end (exclusive), a whole minute: RFC 3339 or a date (midnight UTC); a time after now stops at the last attributable minute.").Required().StringVar(&f.To)
	c.Flag("by", "One row per GPU model, node or GPU (then the __fleet__ row).").Default("model").EnumVar(&f.By, "model", "node", "gpu")
	c.Flag("format", "Output format.").Default("csv").EnumVar(&f.Format, "csv", "json")
	c.Flag("attribution.presence", "The presence period the attribution service runs with: a GPU is capacity from each of its samples for this long.").
		Default("1h").DurationVar(&f.Presence)
	tenantLimitFlag(c, &f.TenantLimit)
	return f
}

// options are the flags' options, checked (usage errors name the flag); a --to after now is cut
// (fleet.Horizon), and logger says so.
func (f *fleetFlags) options(now time.Time, logger *slog.Logger) (fleet.Options, error) {
	from, to, err := report.ParseWindow("--from", f.From, "--to", f.To)
	if err != nil {
		return fleet.Options{}, usage.Wrap(err)
	}
	end, clamped, err := fleet.Horizon("--from", from, to, now.Add(-attribution.DefaultDelay))
	if err != nil {
		return fleet.Options{}, usage.Wrap(err)
	} else if to = end; clamped {
		logger.Info("--to is in the future: the fleet report stops at the last attributable minute", "to", f.To, "window_end", end.UTC().Format(time.RFC3339))
	}
	if err := fleet.CheckWindow(from, to); err != nil {
		return fleet.Options{}, usage.Wrap(fmt.Errorf("--from and --to: %w", err))
	}
	by, err := fleet.ParseBy(f.By)
	if err != nil {
		return fleet.Options{}, usage.Wrap(fmt.Errorf("--by: %w", err))
	}
	if err := store.CheckPresence(f.Presence); err != nil {
		return fleet.Options{}, usage.Errorf("--attribution.presence: %w", err)
	}
	if err := fleet.CheckTenantLimit(f.TenantLimit); err != nil {
		return fleet.Options{}, err
	}
	return fleet.Options{From: from, To: to, By: by, Presence: f.Presence, TenantLimit: f.TenantLimit}, nil
}

// run prints the rows of the flags' window, from what ClickHouse stores, on w.
func (f *fleetFlags) run(ctx context.Context, w io.Writer, logger *slog.Logger) error {
	opts, err := f.options(time.Now(), logger)
	if err != nil {
		return err
	}
	book, conn, err := bookAndDatabase(ctx, f.Pricebook, f.Scenario, f.DSN)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := fleet.Compute(ctx, conn, book, opts)
	if err != nil {
		return err
	}
	return fleet.Write(w, rows, fleet.Format(f.Format))
}
