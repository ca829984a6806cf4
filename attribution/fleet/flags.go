package fleet

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

// Flags are `slicemeter fleet`'s flags.
type Flags struct {
	DSN         string
	Pricebook   string
	Scenario    string
	From, To    string
	By          string
	Format      string
	Presence    time.Duration
	TenantLimit int
}

// TenantLimitFlag adds --fleet.max-tenants-per-host, into limit (the fleet command's and the
// attribution service's, whose gauges carry it for the alert).
func TenantLimitFlag(c *kingpin.CmdClause, limit *int) {
	c.Flag("fleet.max-tenants-per-host", "The most tenants one host should carry (the blast radius of a host failure); more is reported and alerted on.").
		Default(strconv.Itoa(DefaultMaxTenantsPerHost)).IntVar(limit)
}

// CheckTenantLimit refuses a limit under 1.
func CheckTenantLimit(limit int) error {
	if limit < 1 {
		return usage.Errorf("--fleet.max-tenants-per-host %d: expected at least 1", limit)
	}
	return nil
}

// AddFlags adds the fleet command's flags to c.
func AddFlags(c *kingpin.CmdClause) *Flags {
	f := &Flags{}
	migrations.DSNFlag(c, &f.DSN)
	pricebook.SourceFlags(c, &f.Pricebook, &f.Scenario)
	c.Flag("from", "Window start, RFC 3339, a whole minute (e.g. 2026-01-05T00:00:00Z).").Required().StringVar(&f.From)
	c.Flag("to", "Window end (exclusive), RFC 3339, a whole minute.").Required().StringVar(&f.To)
	c.Flag("by", "One row per GPU model, node or GPU (then the __fleet__ row).").Default("model").EnumVar(&f.By, "model", "node", "gpu")
	c.Flag("format", "Output format.").Default("csv").EnumVar(&f.Format, "csv", "json")
	c.Flag("attribution.presence", "The presence period the attribution service runs with: a GPU is capacity from each of its samples for this long.").
		Default("1h").DurationVar(&f.Presence)
	TenantLimitFlag(c, &f.TenantLimit)
	return f
}

// Options are the flags' options, checked (usage errors name the flag).
func (f *Flags) Options() (Options, error) {
	from, to, err := report.ParseWindow("--from", f.From, "--to", f.To)
	if err != nil {
		return Options{}, usage.Wrap(err)
	}
	if err := CheckWindow(from, to); err != nil {
		return Options{}, usage.Wrap(fmt.Errorf("--from and --to: %w", err))
	}
	by, err := ParseBy(f.By)
	if err != nil {
		return Options{}, usage.Wrap(fmt.Errorf("--by: %w", err))
	}
	if err := store.CheckPresence(f.Presence); err != nil {
		return Options{}, usage.Errorf("--attribution.presence: %w", err)
	}
	if err := CheckTenantLimit(f.TenantLimit); err != nil {
		return Options{}, err
	}
	return Options{From: from, To: to, By: by, Presence: f.Presence, TenantLimit: f.TenantLimit}, nil
}

// Run is `slicemeter fleet`: the rows of the flags' window, from what ClickHouse stores, on w.
func Run(ctx context.Context, f *Flags, w io.Writer) error {
	opts, err := f.Options()
	if err != nil {
		return err
	}
	book, err := pricebook.LoadFileOrScenario(f.Pricebook, f.Scenario)
	if err != nil {
		return usage.Wrap(err)
	}
	conn, err := migrations.Open(ctx, f.DSN)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := Compute(ctx, conn, book, opts)
	if err != nil {
		return err
	}
	return Write(w, rows, Format(f.Format))
}
