package attribution_test

import (
	"context"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestColdStartSearch: the first attached sample is searched in the quarter hour after
// requested_at, in groups of allocations requested close together, then further for the
// allocations without one. Allocations requested hours apart, found in either search or in
// none, keep the cold start the README defines, from every sample source, in a one-minute window
// long after the requests (what the continuous service computes every minute).
func TestColdStartSearch(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	ctx := context.Background()
	mig := func(id string) instance {
		in := migA100
		in.id = id
		return in
	}
	type alloc struct {
		id        string
		in        instance
		requested time.Duration // from t0
		attached  time.Duration // first attached sample, from t0; 0: never
		want      time.Duration // the cold start; -1: unknown
	}
	allocs := []alloc{
		{"early", mig("gpu0/mig0"), -3 * time.Hour, -3*time.Hour + 12*time.Second, 12 * time.Second},
		// Attached 40 minutes after the request: found by the second search only.
		{"slow", mig("gpu0/mig1"), -3*time.Hour + 30*time.Minute, -3*time.Hour + 70*time.Minute, 40 * time.Minute},
		// Already attached (by a previous holder) before the request: the first sample at it.
		{"warm", mig("gpu0/mig2"), -70 * time.Minute, -2 * time.Hour, 0},
		{"never", mig("gpu0/mig3"), -20 * time.Minute, 0, -1},
		// Already attached, requested inside a minute: from samples_1s that minute is read per
		// second (samples_1m's row of it starts before the request). samples_1m alone has the
		// next minute's first sample (minuteWant).
		{"warm-mid-minute", mig("gpu0/mig4"), -50*time.Minute + 30*time.Second, -2 * time.Hour, 0},
	}
	minuteWant := map[string]time.Duration{"warm-mid-minute": 30 * time.Second}
	var samples []*pb.Sample
	for at := -3 * time.Hour; at < time.Minute; at += time.Second {
		for _, a := range allocs {
			attached := a.attached != 0 && at >= a.attached
			samples = append(samples, a.in.sample(at, time.Second, attached, 0.5))
		}
	}
	insertSamples(t, conn, "node-a", samples)
	chtest.RollUp(t, conn)
	var rows []allocationRow
	for _, a := range allocs {
		rows = append(rows, allocationRow{id: a.id, tenant: "acme", tier: "pro", node: "node-a", instance: a.in.id,
			requested: t0.Add(a.requested), started: t0.Add(a.requested), version: 1})
	}
	insertAllocations(t, conn, rows)

	for _, source := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
		t.Run(source.String(), func(t *testing.T) {
			_, lines, err := linesOf(ctx, conn, t0, t0.Add(time.Minute), book, source)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]time.Duration{}
			for _, l := range lines {
				got[l.AllocationID] = -1
				if l.ColdStart != nil {
					got[l.AllocationID] = *l.ColdStart
				}
			}
			for _, a := range allocs {
				if w, ok := minuteWant[a.id]; ok && source == store.MinuteRollup {
					a.want = w
				}
				if c, ok := got[a.id]; !ok || c != a.want {
					t.Errorf("allocation %s: cold start %s (found %v), want %s (-1ns: unknown)", a.id, c, ok, a.want)
				}
			}
		})
	}

	// The attribution service's passes remember the answers older than their lookback
	// (store.ColdStarts): minute after minute, the same cold starts, searched once; a window
	// that ends before an allocation's first attached sample still has none.
	for _, source := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
		t.Run(source.String()+"/remembered", func(t *testing.T) {
			known := store.NewColdStarts()
			known.Pass(t0.Add(-10 * time.Minute))
			for i, from := range []time.Time{t0.Add(-2 * time.Minute), t0.Add(-time.Minute), t0} {
				res, err := attribution.Report(ctx, conn, book, attribution.Options{From: from, To: from.Add(time.Minute), Samples: source, Lines: true,
					ColdStarts: known, Now: t0.Add(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range allocs {
					if w, ok := minuteWant[a.id]; ok && source == store.MinuteRollup {
						a.want = w
					}
					got := time.Duration(-1)
					for _, l := range res.Lines {
						if l.AllocationID == a.id && l.ColdStart != nil {
							got = *l.ColdStart
						}
					}
					if got != a.want {
						t.Errorf("minute %d: allocation %s: cold start %s, want %s (-1ns: unknown)", i, a.id, got, a.want)
					}
				}
				// Every allocation with a cold start is remembered (all found before the bound).
				if known.Len() != len(allocs)-1 {
					t.Errorf("minute %d: %d cold starts remembered, want %d (all but never)", i, known.Len(), len(allocs)-1)
				}
			}
			// "slow" was first attached 70 minutes after t0 − 3 h: a minute before that has no
			// cold start for it, remembered or not.
			from := t0.Add(-3*time.Hour + 40*time.Minute)
			res, err := attribution.Report(ctx, conn, book, attribution.Options{From: from, To: from.Add(time.Minute), Samples: source, Lines: true,
				ColdStarts: known, Now: t0.Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range res.Lines {
				if l.AllocationID == "slow" && l.ColdStart != nil {
					t.Errorf("slow, 30 minutes before its first attached sample: cold start %s from memory, want none", *l.ColdStart)
				}
			}
		})
	}
}
