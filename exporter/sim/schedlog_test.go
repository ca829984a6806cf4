package sim

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// Two always-busy vGPUs with 1 ms slices fill the driver's 200-entry log in 206 ms, faster than
// a 250 ms tick. Read between the ticks on the loop's clock, nothing is lost and every tick is
// measured; read once a tick only (the poll disabled), the log wraps: the lost GPU time is
// counted in slicemeter_exporter_vgpu_schedlog_lost_seconds_total and those ticks are
// unmeasured (sm_active_unavailable), never reported as idle.
func TestSchedulerLogWrap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		poll     bool
		wantLost bool
	}{
		{"polled between ticks", true, false},
		{"poll disabled", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := scenario.Load("../testdata/vgpu-longtick.yaml")
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			src, err := New(sc, "", Options{Metrics: nvmlsource.NewMetrics(reg)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var measured, unmeasured int
			for n := 0; n < 80; n++ { // 20 s: past the allocations' start at 10 s
				tick := sc.Start.Add(time.Duration(n) * sc.Interval)
				if tc.poll {
					if _, err := exporter.PollBefore(ctx, src, exporter.FastClock{}, tick, sc.Interval); err != nil {
						t.Fatal(err)
					}
				}
				ns, err := src.Read(ctx, tick, sc.Interval)
				if err != nil {
					t.Fatal(err)
				}
				if n < 40 {
					continue // the vGPUs have work from 10 s (tick 40) on
				}
				for _, node := range ns {
					for _, smp := range node.Samples {
						if smp.SmActiveUnavailable {
							unmeasured++
						} else {
							measured++
							if n > 40 && smp.SmActive < 0.45 { // the first busy tick starts with the switch into it
								t.Errorf("tick %d %s: sm_active %.3f measured, want about 0.485", n, smp.InstanceId, smp.SmActive)
							}
						}
					}
				}
			}
			lost := 0.0
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "slicemeter_exporter_vgpu_schedlog_lost_seconds_total" {
					for _, m := range mf.GetMetric() {
						lost += m.GetCounter().GetValue()
					}
				}
			}
			if tc.wantLost {
				// 40 reads, each 250 ms after the previous, find 200 entries of the latest
				// 206 ms: about 44 ms lost each.
				if lost < 40*0.030 || lost > 40*0.060 || unmeasured != 2*40 || measured != 0 {
					t.Errorf("lost %.3f s, %d unmeasured and %d measured samples; want about 1.8 s, 80 and 0", lost, unmeasured, measured)
				}
			} else if lost != 0 || unmeasured != 0 || measured != 2*40 {
				t.Errorf("lost %.3f s, %d unmeasured and %d measured samples; want 0, 0 and 80", lost, unmeasured, measured)
			}
			if n := testutil.CollectAndCount(reg, "slicemeter_exporter_vgpu_schedlog_lost_seconds_total"); n != 1 {
				t.Errorf("%d lost-time series, want 1 (the GPU's, from the start)", n)
			}
		})
	}
}
