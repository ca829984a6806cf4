package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestPresenceReadsFromBeforeTheEpoch: the presence of a window that starts within a presence
// period of 1970-01-01 reads from a period before it, below what a DateTime holds: its time
// bounds are clamped, not wrapped (ClickHouse made toDateTime(-3600) a time in 2106, which
// read no sample: a window from 1970 had no capacity, and its __unallocated__ was minus the
// tenants' list cost). The GPU is capacity from its first sample to an hour after its last,
// clipped to the window, from every source. (Samples are refused before 2000 at every door;
// the clamp is what keeps every window edge right whatever the window.)
func TestPresenceReadsFromBeforeTheEpoch(t *testing.T) {
	ctx := context.Background()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	epoch := time.Unix(0, 0).UTC()
	first := epoch.Add(10*time.Minute + 250*time.Millisecond)
	var samples []*pb.Sample
	for at := time.Duration(0); at < 10*time.Minute; at += time.Second {
		samples = append(samples, chtest.WholeA100.Sample(first.Sub(chtest.T0)+at, time.Second, false, 0))
	}
	chtest.InsertSamples(t, conn, "node-a", samples)
	chtest.RollUp(t, conn)
	last := first.Add(10*time.Minute - time.Second)
	for _, w := range [][2]time.Duration{{0, 3 * time.Hour}, {30 * time.Minute, 3 * time.Hour}, {59 * time.Minute, 2 * time.Hour}} {
		window := billing.Interval{Start: epoch.Add(w[0]).UnixNano(), End: epoch.Add(w[1]).UnixNano()}
		want := last.Add(time.Hour).Sub(maxTime(first, epoch.Add(w[0])))
		for _, src := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
			t.Run(fmt.Sprintf("%s/%s", w[0], src), func(t *testing.T) {
				p, err := store.ReadPresence(ctx, conn, src, window, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				gpus, err := p.Capacity(window)
				if err != nil {
					t.Fatal(err)
				}
				var got time.Duration
				for _, ivs := range gpus {
					got += billing.Total(ivs)
				}
				if len(gpus) != 1 || got != want {
					t.Errorf("capacity of %d GPUs for %s, want the A100 for %s", len(gpus), got, want)
				}
			})
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
