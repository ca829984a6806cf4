package allocations

import (
	"fmt"

	"github.com/slicemeter/slicemeter/schemas/allocation"
)

// ImportCheck is the Check of `slicemeter allocations import`, a door that knows no
// principal's role: unless allowMoves (--allow-tenant-moves), a change of a stored
// allocation's tenant refuses the whole file (ErrRefused, at the allocation's place in allocs
// for AtLine), as over HTTP only an operator may move one. nil when allowMoves.
func ImportCheck(allocs []allocation.Allocation, allowMoves bool) Check {
	if allowMoves {
		return nil
	}
	at := make(map[string]int, len(allocs))
	for i, a := range allocs {
		at[a.ID] = i
	}
	return func(prev, next allocation.Allocation) error {
		if prev.Tenant == next.Tenant {
			return nil
		}
		return fmt.Errorf("%w: %w", ErrRefused, &allocation.Conflict{Index: at[next.ID],
			Err: fmt.Errorf("allocation %q: moving it from tenant %q to %q needs --allow-tenant-moves", next.ID, prev.Tenant, next.Tenant)})
	}
}
