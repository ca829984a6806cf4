package fleet_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// TestFleetShares: replicas of a shared GPU count in the fleet by their billed fraction
// (1/replicas) and their activity as it is (already a share of the GPU's time), checked by hand
// on the public share scenario.
func TestFleetShares(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates an hour of a fleet into ClickHouse")
	}
	sc, err := scenario.Load(filepath.Join("..", "..", "schemas", "scenario", "testdata", "share-timeslice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := attributed(t, sc)
	rows, err := fleet.Compute(context.Background(), conn, sc.Book, fleet.Options{From: sc.Start, To: sc.End(), By: fleet.ByModel})
	if err != nil {
		t.Fatal(err)
	}
	total := rows[len(rows)-1]
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"capacity GPU-hours", total.CapacityGPUHours, 2},
		// infer 1/4 × 3580 s + 1/2 × 1760 s, batch 1/4 × 2640 s + 1/4 × 3600 s.
		{"allocated GPU-hours", total.AllocatedGPUHours, (0.25*3580 + 0.5*1760 + 0.25*2640 + 0.25*3600) / 3600},
		// Σ sm × time: 0.20 × 3580 + 0.60 × 1760 + 0.10 × 1440 + 0.25 × 1200 (+ 0 × 3600).
		{"active GPU-hours", total.ActiveGPUHours, (0.20*3580 + 0.60*1760 + 0.10*1440 + 0.25*1200) / 3600},
		{"revenue", total.Revenue, 1.183333333 + 0.624},
		{"list revenue", total.ListRevenue, 1.183333333 + 1.04},
	} {
		if abs(c.got-c.want) > 1e-6 { // the money by hand is to 1e-9
			t.Errorf("%s %.9f, want %.9f", c.name, c.got, c.want)
		}
	}
	if total.OverheadRatio != nil && *total.OverheadRatio != 0 {
		t.Errorf("overhead ratio %v, want 0: shares have no overhead", *total.OverheadRatio)
	}
	if total.MaxTenantsPerHost != 2 || total.FragmentedSlices != 0 {
		t.Errorf("tenants per host %d, fragmented slices %d; want 2 and 0", total.MaxTenantsPerHost, total.FragmentedSlices)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
