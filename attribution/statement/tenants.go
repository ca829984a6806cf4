package statement

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// KnownTenants are the tenants a statement of [start, end) can be about, in name order: those
// with an allocation billed in the window (store.ReadAllocations) and those the price book
// names (contracts, in force or dated). A statement of any other tenant would be all zeros: a
// misspelt name, not a tenant that used nothing.
func KnownTenants(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, start, end time.Time) ([]string, error) {
	allocs, err := store.ReadAllocations(ctx, conn, billing.Interval{Start: start.UnixNano(), End: end.UnixNano()})
	if err != nil {
		return nil, fmt.Errorf("the tenants of [%s, %s): %w", start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), err)
	}
	seen := map[string]bool{}
	for _, a := range allocs {
		seen[a.Tenant] = true
	}
	if book != nil {
		for t := range book.Contracts {
			seen[t] = true
		}
		for _, c := range book.Changes {
			for t := range c.Contracts {
				seen[t] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return slices.Clip(out), nil
}

// CheckTenant refuses, with exit 2, a tenant the period does not know (KnownTenants):
// its statement would be all zeros, which reads as a tenant that used nothing when the name is
// more likely misspelt. It is a usage error, not a data error: the data are fine, the flag
// (the command's --tenant) names nothing in them. The message lists the period's tenants (a few) and the report that
// shows them all.
func CheckTenant(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, tenant string, m period.Month) error {
	start, end := m.Bounds(book.Zone())
	known, err := KnownTenants(ctx, conn, book, start, end)
	if err != nil {
		return err
	}
	if slices.Contains(known, tenant) {
		return nil
	}
	list := "it has none"
	switch {
	case len(known) > 10:
		list = "they are " + strings.Join(known[:10], ", ") + fmt.Sprintf(" and %d more", len(known)-10)
	case len(known) > 0:
		list = "they are " + strings.Join(known, ", ")
	}
	return usage.Errorf("--tenant %q: no allocation of this tenant is billed in %s and the price book has no contract for it; "+
		"expected a tenant of the period (%s; slicemeter report --from %s --to %s lists them, one row each)",
		tenant, m, list, start.Format(time.RFC3339), end.Format(time.RFC3339))
}
