package attribution_test

import (
	"context"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestReportNeverBillsTheFuture: a window that reaches past now minus the attribution delay
// bills an open allocation up to that horizon, and the report's window ends there; a window
// wholly in the future is an empty bill.
func TestReportNeverBillsTheFuture(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	ctx := context.Background()
	var samples []*pb.Sample
	for at := time.Duration(0); at < 10*time.Minute; at += time.Second {
		samples = append(samples, migA100.sample(at, time.Second, true, 0.5))
	}
	insertSamples(t, conn, "node-a", samples)
	insertAllocations(t, conn, []allocationRow{
		{id: "open", tenant: "acme", tier: "pro", node: "node-a", instance: migA100.id, requested: t0, started: t0, version: 1},
	})
	now := t0.Add(10 * time.Minute)
	for _, tt := range []struct {
		name     string
		from, to time.Time
		delay    time.Duration
		want     time.Time // the horizon
	}{
		{"window ends in the future", t0, t0.Add(365 * 24 * time.Hour), 0, now.Add(-attribution.DefaultDelay)},
		{"a longer delay", t0, t0.Add(time.Hour), 2 * time.Minute, now.Add(-2 * time.Minute)},
		{"window in the past", t0, t0.Add(5 * time.Minute), 0, t0.Add(5 * time.Minute)},
		{"window wholly in the future", now, now.Add(time.Hour), 0, now},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := attribution.Report(ctx, conn, book, attribution.Options{From: tt.from, To: tt.to, Now: now, Delay: tt.delay})
			if err != nil {
				t.Fatal(err)
			}
			rep := res.Report
			if !rep.WindowEnd.Equal(tt.want) {
				t.Errorf("window end %s, want the horizon %s", rep.WindowEnd, tt.want)
			}
			var allocated time.Duration
			for _, r := range rep.Tenants {
				allocated += r.Allocated
				if !r.WindowEnd.Equal(tt.want) {
					t.Errorf("row %s ends %s, want %s", r.Tenant, r.WindowEnd, tt.want)
				}
			}
			if want := tt.want.Sub(tt.from); allocated != want {
				t.Errorf("allocated %s, want %s (billed to the horizon)", allocated, want)
			}
		})
	}
}
