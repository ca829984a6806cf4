package billing

import (
	"fmt"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// Tolerance is how far money may stray from an invariant through float rounding.
const Tolerance = 1e-6

// The invariants, as InvariantError.Invariant names them (the label of the service's
// slicemeter_attribution_invariant_violations_total).
const (
	InvariantCapacity   = "capacity"   // Σ tenants' list_cost + unallocated = capacity
	InvariantCostSplit  = "cost_split" // cost = used + waste + overhead (+ unmeasured), each ≥ 0
	InvariantEfficiency = "efficiency" // efficiency in [0, 1]
	InvariantMetered    = "unmetered"  // unmetered ≤ allocated
	InvariantOverlap    = "overlap"    // no two allocations hold one instance at once
)

// InvariantError is one violation of an invariant.
type InvariantError struct {
	Invariant string
	Detail    string
}

func (e *InvariantError) Error() string { return e.Invariant + " invariant: " + e.Detail }

// CheckInvariants returns every way the report breaks the report's invariants (attribution/README.md):
//   - Σ tenants' list_cost + unallocated = capacity list cost (unallocated may be negative: a
//     GPU held through a whole window without a sample is billed but not in the capacity);
//   - cost = used + waste + overhead with used ≥ 0 (waste + overhead ≤ cost, each ≥ 0). The
//     equality holds for measured metered time only: unmetered time and time whose activity was
//     not measured (sm_active_unavailable) are neither used nor waste, so for them the check is
//     the inequality, and a tenant with nothing measured (no efficiency) must have no waste;
//   - efficiency in [0, 1]; unmetered ≤ allocated;
//   - no two allocations hold one instance at the same time.
//
// The service checks each window it attributes and counts what breaks; tests check them on
// every report they compute.
func CheckInvariants(r report.Report) []error {
	var errs []error
	fail := func(invariant, format string, args ...any) {
		window := []any{r.WindowStart.Format("2006-01-02T15:04:05Z07:00"), r.WindowEnd.Format("2006-01-02T15:04:05Z07:00")}
		errs = append(errs, &InvariantError{invariant, fmt.Sprintf("window [%s, %s): "+format, append(window, args...)...)})
	}
	sum := r.UnallocatedListCost
	for _, row := range r.Tenants {
		sum += row.ListCost
		switch {
		case row.ListCost < -Tolerance || row.Cost < -Tolerance || row.WasteCost < -Tolerance || row.OverheadCost < -Tolerance:
			fail(InvariantCostSplit, "tenant %q has a negative amount (list %g, cost %g, waste %g, overhead %g)", row.Tenant, row.ListCost, row.Cost, row.WasteCost, row.OverheadCost)
		case row.WasteCost+row.OverheadCost > row.Cost+Tolerance:
			fail(InvariantCostSplit, "tenant %q: waste %g + overhead %g exceed its cost %g (used would be negative)", row.Tenant, row.WasteCost, row.OverheadCost, row.Cost)
		case row.Efficiency == nil && row.WasteCost > Tolerance:
			fail(InvariantCostSplit, "tenant %q: waste %g without any measured time (no efficiency): only measured time can be waste", row.Tenant, row.WasteCost)
		}
		if row.Efficiency != nil && (*row.Efficiency < 0 || *row.Efficiency > 1) {
			fail(InvariantEfficiency, "tenant %q: efficiency %g is outside [0, 1]", row.Tenant, *row.Efficiency)
		}
		if row.Unmetered > row.Allocated {
			fail(InvariantMetered, "tenant %q: unmetered %s exceeds allocated %s", row.Tenant, row.Unmetered, row.Allocated)
		}
	}
	for _, o := range r.Overlaps {
		fail(InvariantOverlap, "%s", o)
	}
	if d := sum - r.CapacityListCost; d > Tolerance || d < -Tolerance {
		fail(InvariantCapacity, "Σ tenants' list_cost + unallocated = %.9f, capacity list cost = %.9f", sum, r.CapacityListCost)
	}
	return errs
}
