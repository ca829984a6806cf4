package attribution_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestCapacityOfAFleetThatJustArrived: a GPU sampled for 48 s in the middle of a month is 48 s
// of capacity in the month's report made right after, and 48 s plus the presence period (1 h)
// once the month is over: not a month of it. From every sample source.
func TestCapacityOfAFleetThatJustArrived(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	ctx := context.Background()
	month := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	arrived := 10*time.Hour + 20*time.Second + 350*time.Millisecond // after T0, mid-minute and mid-second
	var samples []*pb.Sample
	for at := time.Duration(0); at < 48*time.Second; at += 100 * time.Millisecond {
		samples = append(samples, wholeA100.sample(arrived+at, 100*time.Millisecond, false, 0))
	}
	insertSamples(t, conn, "node-a", samples)
	chtest.RollUp(t, conn)
	start := t0.Add(arrived)
	const price = 1.60 // A100 per hour
	for _, tt := range []struct {
		name     string
		now      time.Time
		capacity time.Duration
	}{
		// The horizon is now − 30 s, the end of the 48 s.
		{"report right after", start.Add(48*time.Second + attribution.DefaultDelay), 48 * time.Second},
		// The last sample is 47.9 s after the first, present for an hour after it.
		{"month closed", month.AddDate(0, 1, 1), 47900*time.Millisecond + time.Hour},
	} {
		for _, source := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
			t.Run(fmt.Sprintf("%s/%s", tt.name, source), func(t *testing.T) {
				res, err := attribution.Report(ctx, conn, book, attribution.Options{From: month, To: month.AddDate(0, 1, 0), Samples: source, Now: tt.now})
				if err != nil {
					t.Fatal(err)
				}
				want := price * tt.capacity.Hours()
				if got := res.Report.CapacityListCost; math.Abs(got-want) > 1e-9 {
					t.Errorf("capacity %.9f (%.3f h of the A100), want %.9f (%s)", got, got/price, want, tt.capacity)
				}
				if got := res.Report.UnallocatedListCost; math.Abs(got-want) > 1e-9 {
					t.Errorf("unallocated %.9f, want %.9f", got, want)
				}
			})
		}
	}
}

// TestCapacityWhilePresent: a GPU is capacity from each of its samples for the presence
// period (1 h), clipped to the window: an exporter outage shorter than that stays capacity,
// a longer one does not beyond the hour, and a GPU's instances count together. Raw samples,
// samples_1s, samples_1m and the minutes the attribution service stored agree to 1e-6 on
// capacity and unallocated for whole-minute windows (the service's minutes stored from raw
// samples and from samples_1s), and all equal the definition. Five hours
// of 1 s samples, taken a fraction of a second after each second:
//
//	GPU-a0 (A100, gpu0/mig0): sampled [0, 30 min), [60, 90 min) (30 min out), [180, 200 min)
//	        (90 min out), then gone: capacity [0.25 s, 149:59.25) and [180:00.25, 259:59.25).
//	GPU-b0 (H100): vgpu0 sampled [0, 100 min), vgpu1 [150, 300 min): capacity from 0.5 s on.
//
// acme holds gpu0/mig0 for [10, 40 min).
func TestCapacityWhilePresent(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	ctx := context.Background()
	const window = 5 * time.Hour
	var nodeA, nodeB []*pb.Sample
	for s := time.Duration(0); s < window; s += time.Second {
		if m := s / time.Minute; m < 30 || m >= 60 && m < 90 || m >= 180 && m < 200 {
			nodeA = append(nodeA, migA100.sample(s+250*time.Millisecond, time.Second, true, 0.5))
		}
		if s < 100*time.Minute {
			nodeB = append(nodeB, vgpu0.sample(s+500*time.Millisecond, time.Second, false, 0))
		}
		if s >= 150*time.Minute {
			nodeB = append(nodeB, vgpu1.sample(s+500*time.Millisecond, time.Second, false, 0))
		}
	}
	insertSamples(t, conn, "node-a", nodeA)
	insertSamples(t, conn, "node-b", nodeB)
	chtest.RollUp(t, conn)
	insertAllocations(t, conn, []allocationRow{
		{id: "acme-1", tenant: "acme", tier: "pro", node: "node-a", instance: migA100.id, requested: t0.Add(10 * time.Minute),
			started: t0.Add(10 * time.Minute), ended: t0.Add(40 * time.Minute), version: 1},
	})
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ms := func(m, s, milli int) time.Duration {
		return time.Duration(m)*time.Minute + time.Duration(s)*time.Second + time.Duration(milli)*time.Millisecond
	}
	// The definition, by hand: price per hour and the intervals of presence.
	present := []struct {
		price    float64
		from, to time.Duration
	}{
		{1.60, ms(0, 0, 250), ms(149, 59, 250)},
		{1.60, ms(180, 0, 250), ms(259, 59, 250)},
		{2.40, ms(0, 0, 500), window},
	}
	capacityOf := func(from, to time.Time) float64 {
		c := 0.
		for _, p := range present {
			lo, hi := maxTime(from, at(p.from)), minTime(to, at(p.to))
			if hi.After(lo) {
				c += p.price * hi.Sub(lo).Hours()
			}
		}
		return c
	}

	now := at(window + time.Hour)
	windows := [][2]time.Time{{at(0), at(window)}, {at(149 * time.Minute), at(151 * time.Minute)}, {at(179 * time.Minute), at(181 * time.Minute)}}
	for m := time.Duration(0); m < window; m += 30 * time.Minute {
		windows = append(windows, [2]time.Time{at(m), at(m + 30*time.Minute)})
	}
	// The attribution service stores every minute of the five hours, from the per-second
	// rollup (its default), then again from raw samples (a later pass, which the stored
	// minutes read).
	for pass, source := range []store.Samples{store.SecondRollup, store.RawSamples} {
		runner := service.NewRunner(conn, book, service.Passes{Delay: 30 * time.Second, Lookback: window, Backfill: window, MaxRecompute: window,
			MaxMinutes: 300, Presence: time.Hour, Samples: source}, nil, slog.New(slog.DiscardHandler))
		runner.SetClock(func() time.Time { return at(window + 30*time.Second + time.Duration(pass)*time.Second) })
		if p, err := runner.Once(ctx); err != nil || p.Fresh+p.Recomputed != 300 {
			t.Fatalf("attribute the five hours from %s: %+v, %v", source, p, err)
		}
		if pass == 0 {
			for _, w := range windows {
				res, err := attribution.Report(ctx, conn, book, attribution.Options{From: w[0], To: w[1], Now: now, FromMinutes: true})
				if want := capacityOf(w[0], w[1]); err != nil || math.Abs(res.Report.CapacityListCost-want) > 1e-9 {
					t.Errorf("[%s, %s) from the minutes stored from %s: capacity %.9f, %v; want %.9f", w[0].Format(time.TimeOnly), w[1].Format(time.TimeOnly),
						source, res.Report.CapacityListCost, err, want)
				}
			}
		}
	}
	for _, w := range windows {
		from, to := w[0], w[1]
		want := capacityOf(from, to)
		var first *attribution.Result
		for _, path := range []struct {
			name string
			o    attribution.Options
		}{
			{"raw", attribution.Options{Samples: store.RawSamples}},
			{"rollup-1s", attribution.Options{Samples: store.SecondRollup}},
			{"rollup-1m", attribution.Options{Samples: store.MinuteRollup}},
			{"from-minutes", attribution.Options{FromMinutes: true}},
		} {
			o := path.o
			o.From, o.To, o.Now = from, to, now
			res, err := attribution.Report(ctx, conn, book, o)
			if err != nil {
				t.Fatalf("[%s, %s) %s: %v", from.Format(time.TimeOnly), to.Format(time.TimeOnly), path.name, err)
			}
			rep := res.Report
			if got := rep.CapacityListCost; math.Abs(got-want) > 1e-9 {
				t.Errorf("[%s, %s) %s: capacity %.9f, want %.9f", from.Format(time.TimeOnly), to.Format(time.TimeOnly), path.name, got, want)
			}
			if first == nil {
				first = &res
				continue
			}
			if d := rep.UnallocatedListCost - first.Report.UnallocatedListCost; math.Abs(d) > 1e-6 {
				t.Errorf("[%s, %s) %s: unallocated %.9f, raw samples %.9f", from.Format(time.TimeOnly), to.Format(time.TimeOnly), path.name,
					rep.UnallocatedListCost, first.Report.UnallocatedListCost)
			}
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// TestCapacityOfWideWindows: a window that starts long before the fleet's first sample (as
// early as the accepted range allows, 2000-01-01) and ends long after its last has the
// capacity and the unallocated of one that starts at the first sample, from every sample
// source, and its window_start is the start asked for. (A window start taken a presence
// period back below a DateTime's 1970 read no samples, or the wrong ones.)
func TestCapacityOfWideWindows(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	ctx := context.Background()
	var samples []*pb.Sample
	for at := time.Duration(0); at < 10*time.Minute; at += time.Second {
		samples = append(samples, migA100.sample(at+250*time.Millisecond, time.Second, true, 0.5))
	}
	insertSamples(t, conn, "node-a", samples)
	chtest.RollUp(t, conn)
	insertAllocations(t, conn, []allocationRow{
		{id: "acme-1", tenant: "acme", tier: "pro", node: "node-a", instance: migA100.id, requested: t0.Add(2 * time.Minute),
			started: t0.Add(2 * time.Minute), ended: t0.Add(5 * time.Minute), version: 1},
	})
	end := t0.Add(24 * time.Hour)
	now := end.Add(time.Hour)
	// The A100 is capacity from its first sample to an hour after its last (1.60 an hour).
	want := 1.60 * (9*time.Minute + 59*time.Second + time.Hour).Hours()
	for _, from := range []time.Time{t0.Add(250 * time.Millisecond), t0.Add(-time.Hour), time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2000, 1, 1, 0, 30, 0, 0, time.UTC), time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)} {
		for _, source := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
			t.Run(fmt.Sprintf("%s/%s", from.Format(time.RFC3339Nano), source), func(t *testing.T) {
				res, err := attribution.Report(ctx, conn, book, attribution.Options{From: from, To: end, Samples: source, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				rep := res.Report
				if math.Abs(rep.CapacityListCost-want) > 1e-9 {
					t.Errorf("capacity %.9f, want %.9f", rep.CapacityListCost, want)
				}
				tenants := 0.
				for _, r := range rep.Tenants {
					tenants += r.ListCost
				}
				if tenants <= 0 || math.Abs(rep.UnallocatedListCost-(want-tenants)) > 1e-9 {
					t.Errorf("unallocated %.9f, want %.9f (capacity %.9f less the tenants' %.9f)", rep.UnallocatedListCost, want-tenants, want, tenants)
				}
				if !rep.WindowStart.Equal(from) || !rep.WindowEnd.Equal(end) {
					t.Errorf("window [%s, %s), want [%s, %s)", rep.WindowStart, rep.WindowEnd, from, end)
				}
			})
		}
	}
	// Windows with an edge outside the range are refused naming it, never reported for other
	// times: from 1970 gave __unallocated__ minus the tenants' cost, from 0001 a window_start
	// in 1754 (UnixNano wraps).
	for _, w := range []struct {
		from, to time.Time
		edge     string
	}{
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), end, "from: 1970-01-01T00:00:00Z"},
		{time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), end, "from: 1999-12-31T00:00:00Z"},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), end, "from: 0001-01-01T00:00:00Z"},
		{t0, time.Date(2610, 8, 1, 0, 0, 0, 0, time.UTC), "to: 2610-08-01T00:00:00Z"},
	} {
		for _, minutes := range []bool{false, true} {
			res, err := attribution.Report(ctx, conn, book, attribution.Options{From: w.from, To: w.to, Now: now, FromMinutes: minutes})
			if err == nil || !strings.Contains(err.Error(), w.edge) || !strings.Contains(err.Error(), "2106-02-07T06:28:15Z") {
				t.Errorf("[%s, %s) from minutes %v: %v (unallocated %.6f, window_start %s); want it refused naming %q and the range",
					w.from.Format(time.RFC3339), w.to.Format(time.RFC3339), minutes, err, res.Report.UnallocatedListCost, res.Report.WindowStart, w.edge)
			}
		}
	}
}
