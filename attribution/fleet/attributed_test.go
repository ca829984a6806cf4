package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// TestFleetRefusesUnattributed: over an hour the service has attributed only the first half
// of, the rollup has the whole hour's capacity but the stored minutes half its revenue: the
// fleet report refuses the window (stored.ErrNotAttributed, naming the first minute missing),
// whether the hour is read from its minutes or from a roll-up made of its 30 minutes; the
// attributed half alone is reported.
func TestFleetRefusesUnattributed(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates an hour of a fleet into ClickHouse")
	}
	ctx := context.Background()
	sc := economics(t)
	book := sc.Book
	half := sc.Start.Add(30 * time.Minute)
	conn := attributedUntil(t, sc, half)
	refused := func(t *testing.T, name string) {
		t.Helper()
		rows, err := fleet.Compute(ctx, conn, book, fleet.Options{From: sc.Start, To: sc.End(), By: fleet.ByModel})
		var e *stored.NotAttributedError
		if !errors.Is(err, stored.ErrNotAttributed) || !errors.As(err, &e) {
			t.Fatalf("%s: rows %+v, error %v; want stored.ErrNotAttributed", name, rows, err)
		}
		if !e.First.Equal(half) || !e.Last.Equal(sc.End().Add(-time.Minute)) || e.Missing != 30 {
			t.Errorf("%s: %v: first %s, last %s, %d missing; want %s, %s, 30", name, err, e.First, e.Last, e.Missing, half, sc.End().Add(-time.Minute))
		}
		const want = "30 of its 60 minutes are not attributed yet, the first 2026-01-05T00:30:00Z"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q; want it to say %q", name, err, want)
		}
	}
	refused(t, "from the stored minutes")
	// A roll-up of the hour's 30 minutes is fresh (it is of what is stored) but short.
	if err := stored.RollupHours(ctx, conn, sc.Start, sc.End()); err != nil {
		t.Fatal(err)
	}
	var rolled uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM attribution_hours").Scan(&rolled); err != nil || rolled == 0 {
		t.Fatalf("the hour's roll-up: %d rows, %v", rolled, err)
	}
	refused(t, "from the hour's roll-up")

	rows, err := fleet.Compute(ctx, conn, book, fleet.Options{From: sc.Start, To: half, By: fleet.ByModel})
	if err != nil {
		t.Fatalf("the attributed half: %v", err)
	}
	if total := rows[len(rows)-1]; total.Revenue <= 0 || total.CapacityGPUHours <= 0 {
		t.Errorf("the attributed half: %+v; want revenue and capacity", total)
	}
}
