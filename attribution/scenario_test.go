package attribution_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// TestScenarios runs the public scenarios through the simulator into ClickHouse and checks that
// Compute recovers each scenario's expected report from the samples and allocations alone.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates an hour of a fleet per scenario")
	}
	for _, name := range []string{"mig-basic", "outage-coldstart", "vgpu-timeslice"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "schemas", "scenario", "testdata")
			sc, err := scenario.Load(filepath.Join(dir, name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, name+".expected.csv"))
			if err != nil {
				t.Fatal(err)
			}
			conn := newDatabase(t)
			chtest.InsertScenario(t, conn, sc)

			r, err := reportOf(context.Background(), conn, sc.Start, sc.End(), pricebook.FromScenario(sc), store.RawSamples)
			if err != nil {
				t.Fatal(err)
			}
			if errs := billing.CheckInvariants(r); len(errs) > 0 {
				t.Errorf("invariants: %v", errs)
			}
			var got bytes.Buffer
			if err := r.WriteCSV(&got); err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Errorf("report:\n%s\nwant:\n%s", got.String(), want)
			}
		})
	}
}
