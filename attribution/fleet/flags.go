package fleet

import "github.com/slicemeter/slicemeter/internal/usage"

// CheckTenantLimit refuses a limit under 1.
func CheckTenantLimit(limit int) error {
	if limit < 1 {
		return usage.Errorf("--fleet.max-tenants-per-host %d: expected at least 1", limit)
	}
	return nil
}
