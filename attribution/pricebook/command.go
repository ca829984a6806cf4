package pricebook

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// ExampleFile is `slicemeter pricebook example`: a commented starter price book that loads
// (example_test.go) and that README.md in this directory walks through.
//
//go:embed testdata/example.yaml
var ExampleFile string

// FleetCheck checks that a book prices the fleet of the ClickHouse at dsn (sampled within
// since): attribution.CheckFleetPricedAt, passed in because attribution imports this package.
type FleetCheck func(ctx context.Context, dsn string, book *pricebook.PriceBook, since time.Duration) error

// Options are `slicemeter pricebook`'s subcommand and its arguments.
type Options struct {
	Sub   string // check or example
	File  string
	DSN   string
	Since time.Duration
}

// Run is `slicemeter pricebook check|example`, on w.
func Run(ctx context.Context, f *Options, fleet FleetCheck, w io.Writer) error {
	if f.Sub == "example" {
		_, err := io.WriteString(w, ExampleFile)
		return err
	}
	book, err := pricebook.Load(f.File)
	if err != nil {
		return usage.Wrap(err)
	}
	if f.DSN != "" {
		if err := fleet(ctx, f.DSN, book, f.Since); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "%s: ok: %s, %d GPU models, %d tiers, %d contract prices, %d effective-dated changes\n",
		f.File, book.Currency, len(book.Prices), len(book.Tiers), book.ContractPrices(), len(book.Changes)); err != nil {
		return err
	}
	return Describe(w, book)
}

// Describe writes what the book bills how: per GPU model the list price per GPU-hour and the
// price at every tier, the contracts, the effective-dated changes in date order, the SLA,
// the operator's costs and the billing zone.
func Describe(w io.Writer, b *pricebook.PriceBook) error {
	var s strings.Builder
	cur := b.Currency
	tiers := slices.Sorted(maps.Keys(b.Tiers))
	fmt.Fprintf(&s, "billing periods: calendar months in %s\n", b.Zone())
	s.WriteString("list prices (one whole GPU, one hour; a MIG or vGPU slice pays its billed fraction):\n")
	for _, model := range slices.Sorted(maps.Keys(b.Prices)) {
		p := b.Prices[model]
		fmt.Fprintf(&s, "  %s: list %s %s/GPU-hour", model, num(p), cur)
		for i, t := range tiers {
			fmt.Fprintf(&s, "%s %s %s", map[bool]string{true: "; at tier", false: ","}[i == 0], t, num(p*b.Tiers[t]))
		}
		s.WriteString("\n")
	}
	s.WriteString("tiers (cost = list cost × multiplier):\n")
	for _, t := range tiers {
		m := b.Tiers[t]
		fmt.Fprintf(&s, "  %s: × %s (discount %s %%); cold start SLA %s", t, num(m), num((1-m)*100), b.ColdStartSLA(t))
		if j, ok := b.JitterP99[t]; ok {
			fmt.Fprintf(&s, ", jitter p99 SLA %s", j)
		} else {
			s.WriteString(", no jitter SLA")
		}
		s.WriteString("\n")
	}
	if len(b.Contracts) > 0 {
		s.WriteString("contracts (the tenant's price per GPU-hour at every tier, in place of list × multiplier; list cost stays at list price):\n")
		writeContracts(&s, b.Contracts, b.Prices, cur)
	}
	changes := slices.Clone(b.Changes)
	slices.SortStableFunc(changes, func(a, c pricebook.Change) int { return a.Effective.Compare(c.Effective) })
	for _, c := range changes {
		fmt.Fprintf(&s, "from %s (%s):\n", c.Effective.UTC().Format(time.RFC3339), c.Effective.In(b.Zone()).Format("2006-01-02 15:04 MST"))
		for _, model := range slices.Sorted(maps.Keys(c.Prices)) {
			fmt.Fprintf(&s, "  list price %s: %s %s/GPU-hour\n", model, num(c.Prices[model]), cur)
		}
		writeContracts(&s, c.Contracts, nil, cur)
	}
	if b.Costs != nil {
		s.WriteString("operator costs (slicemeter fleet):\n")
		for _, model := range slices.Sorted(maps.Keys(b.Costs.GPUHour)) {
			fmt.Fprintf(&s, "  %s: %s %s/GPU-hour of capacity\n", model, num(b.Costs.GPUHour[model]), cur)
		}
		fmt.Fprintf(&s, "  energy: %s %s/kWh\n", num(b.Costs.EnergyKWh), cur)
	}
	_, err := io.WriteString(w, s.String())
	return err
}

func writeContracts(s *strings.Builder, contracts map[string]map[string]float64, list map[string]float64, cur string) {
	for _, tenant := range slices.Sorted(maps.Keys(contracts)) {
		for _, model := range slices.Sorted(maps.Keys(contracts[tenant])) {
			p := contracts[tenant][model]
			fmt.Fprintf(s, "  contract %s on %s: %s %s/GPU-hour", tenant, model, num(p), cur)
			if l, ok := list[model]; ok && l > 0 {
				fmt.Fprintf(s, " (%s %% off list)", num((1-p/l)*100))
			}
			s.WriteString("\n")
		}
	}
}

// num prints a figure as written, without float noise (0.7 × 1.6 = 1.12, not 1.1199999…).
func num(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.6f", f), "0"), ".")
}
