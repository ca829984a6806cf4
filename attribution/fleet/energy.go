package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// TenantEnergy splits the GPUs' energy of a window of whole minutes over the tenants (J, by
// tenant): in each minute, a GPU's energy goes to its instances by billed fraction, to a
// tenant for the share of the minute it is billed there, and what no tenant is billed for
// (free slices, idle instances, unallocated GPUs) to report.Unallocated. The values sum to the
// fleet's energy.
func TenantEnergy(ctx context.Context, conn store.Querier, from, to time.Time) (map[string]float64, error) {
	if err := CheckWindow(from, to); err != nil {
		return nil, err
	}
	instances, err := store.FleetInstances(ctx, conn, from, to)
	if err != nil {
		return nil, err
	}
	energy := Energy(instances)
	held, err := store.TenantEnergy(ctx, conn, from, to)
	if err != nil {
		return nil, err
	}
	fractions := make(map[[2]string]float64, len(instances))
	for _, x := range instances {
		f, err := pricebook.BilledFraction(x.Facts)
		if err != nil {
			return nil, fmt.Errorf("the billed fraction of %s/%s: %w", x.Node, x.Instance, err)
		}
		fractions[[2]string{x.Node, x.Instance}] = f
	}
	out := map[string]float64{}
	total := 0.
	for _, j := range energy {
		total += j
	}
	tenants := 0.
	for _, h := range held {
		e := h.Energy * fractions[[2]string{h.Node, h.Instance}]
		out[h.Tenant] += e
		tenants += e
	}
	out[report.Unallocated] = total - tenants
	return out, nil
}
