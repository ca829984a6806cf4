package fleet_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
)

// relNear: within 1e-9 of b, relatively (1e-12 absolute for figures near 0).
func relNear(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b)+1e-12 }

// TestTenantMemoryAndEnergy: the tenant report's memory efficiency and energy of
// fleet-economics.yaml are the same from raw samples, samples_1s, samples_1m and the stored
// minutes (per allocation, to 1e-9 relative), each tenant has energy, and each tenant's
// memory efficiency what its workload uses (constant: the figures by hand). A window cut inside
// minutes agrees across the sample sources too.
func TestTenantMemoryAndEnergy(t *testing.T) {
	ctx := context.Background()
	sc, book, conn := economicsAttributed(t)
	lines := func(t *testing.T, o attribution.Options) (map[string]billing.Line, report.Report) {
		t.Helper()
		o.Lines = true
		res, err := attribution.Report(ctx, conn, book, o)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]billing.Line{}
		for _, l := range res.Lines {
			out[l.AllocationID] = l
		}
		return out, res.Report
	}
	same := func(t *testing.T, name string, got, want map[string]billing.Line) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d lines, want %d", name, len(got), len(want))
		}
		for id, w := range want {
			g := got[id]
			if !relNear(g.EnergyJ, w.EnergyJ) || !relNear(g.MemUsedNS, w.MemUsedNS) || !relNear(g.MemNS, w.MemNS) {
				t.Errorf("%s: allocation %s: energy %.12g J, memory %.12g / %.12g ns; raw samples: %.12g J, %.12g / %.12g ns",
					name, id, g.EnergyJ, g.MemUsedNS, g.MemNS, w.EnergyJ, w.MemUsedNS, w.MemNS)
			}
		}
	}

	whole := attribution.Options{From: sc.Start, To: sc.End(), Now: sc.End().Add(time.Hour)}
	raw, rep := lines(t, whole)
	for _, o := range []struct {
		name string
		o    attribution.Options
	}{
		{"samples_1s", attribution.Options{From: whole.From, To: whole.To, Now: whole.Now, Samples: store.SecondRollup}},
		{"samples_1m", attribution.Options{From: whole.From, To: whole.To, Now: whole.Now, Samples: store.MinuteRollup}},
		// The whole hour from its roll-up (attribution_hours), and its minutes.
		{"stored hour", attribution.Options{From: whole.From, To: whole.To, Now: whole.Now, FromMinutes: true}},
	} {
		got, _ := lines(t, o.o)
		same(t, o.name, got, raw)
	}

	var rolled uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM attribution_hours WHERE energy_j > 0").Scan(&rolled); err != nil || rolled == 0 {
		t.Errorf("the hour's roll-up: %d rows with energy, %v", rolled, err)
	}
	// Minutes not on whole hours: from attribution_minutes, against the raw samples' lines.
	minutes := attribution.Options{From: whole.From.Add(time.Minute), To: whole.To.Add(-2 * time.Minute), Now: whole.Now}
	rawMinutes, _ := lines(t, minutes)
	minutes.FromMinutes = true
	got, _ := lines(t, minutes)
	same(t, "stored minutes", got, rawMinutes)

	for _, row := range rep.Tenants {
		if row.EnergyKWh == nil || *row.EnergyKWh <= 0 { // each tenant's share by hand: TestFleetScenario
			t.Errorf("energy of %s: %v kWh, want some", row.Tenant, show(row.EnergyKWh))
		}
		if row.MemoryEfficiency == nil || !relNear(*row.MemoryEfficiency, heldMem[row.Tenant]) {
			t.Errorf("memory efficiency of %s: %s, want %.4f", row.Tenant, show(row.MemoryEfficiency), heldMem[row.Tenant])
		}
	}
	if len(rep.Tenants) != len(heldMem) {
		t.Errorf("%d tenants, want %d", len(rep.Tenants), len(heldMem))
	}

	// A window that starts and ends inside minutes: the sources read the partial minutes each
	// their own way.
	cut := attribution.Options{From: sc.Start.Add(90 * time.Second), To: sc.Start.Add(50*time.Minute + 15*time.Second), Now: whole.Now}
	rawCut, _ := lines(t, cut)
	for _, src := range []store.Samples{store.SecondRollup, store.MinuteRollup} {
		o := cut
		o.Samples = src
		got, _ := lines(t, o)
		same(t, src.String()+" over "+cut.From.Format(time.TimeOnly)+"–"+cut.To.Format(time.TimeOnly), got, rawCut)
	}
}
