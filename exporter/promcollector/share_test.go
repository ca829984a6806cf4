package promcollector

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Share instances (replicas of a time-sliced GPU) are served like any instance, kind="share",
// with their own processes' activity and memory, and the shared GPU has no whole-GPU series.
func TestShareInstancesServed(t *testing.T) {
	_, reg := fleet(t, "share-timeslice")                   // 30 s: infer attached from 20 s, batch's idle replica from 0
	const gpu0 = "GPU-46f25037-c430-631e-d35a-1d988ec501bf" // the simulator's UUID of ks-a's gpu0
	checkSeries(t, exposition(t, reg), []seriesWant{
		{`slicemeter_instance_info{gpu="0",gpu_instance_id="",kind="share",model="H100-SXM5-80GB",node="ks-a",profile="",slice="gpu0/share0",uuid="` + gpu0 + `"} 1`, true},
		{`slicemeter_instance_sm_active_ratio{gpu="0",kind="share",model="H100-SXM5-80GB",node="ks-a",profile="",slice="gpu0/share0",uuid="` + gpu0 + `"} 0.2`, true},
		{`slicemeter_instance_sm_active_ratio{gpu="0",kind="share",model="H100-SXM5-80GB",node="ks-a",profile="",slice="gpu0/share2",uuid="` + gpu0 + `"} 0`, true},
		{`slicemeter_instance_attached{gpu="0",kind="share",model="H100-SXM5-80GB",node="ks-a",profile="",slice="gpu0/share2",uuid="` + gpu0 + `"} 1`, true},
		{`slicemeter_instance_attached{gpu="0",kind="share",model="H100-SXM5-80GB",node="ks-a",profile="",slice="gpu0/share1",uuid="` + gpu0 + `"} 0`, true},
		// A quarter of the H100's 80 GiB.
		{`slicemeter_instance_memory_total_bytes{gpu="0",kind="share",model="H100-SXM5-80GB",node="ks-a",profile="",slice="gpu0/share3",uuid="` + gpu0 + `"} 2.147483648e+10`, true},
		{`slicemeter_instance_processes{gpu="0",kind="share",model="H100-SXM5-80GB",node="ks-a",profile="",slice="gpu0/share0",uuid="` + gpu0 + `"} 1`, true},
		{`slicemeter_exporter_instances{node="ks-a"} 6`, true},
		{`kind="gpu"`, false},
	})
}

// A replica's power is an estimate: its GPU's power split by the replicas' SM activity in the
// tick (equally while none is active), one series per replica, summing to the GPU's power;
// no other kind gets one.
func TestSharePowerEstimate(t *testing.T) {
	share := func(id string, sm float64) *pb.Sample {
		return &pb.Sample{TsNs: 1e18, IntervalNs: 1e8, InstanceId: id, Kind: pb.Kind_KIND_SHARE, GpuUuid: "GPU-x", Model: "H100-SXM5-80GB",
			PowerWatts: 300, SmActive: sm, ShareReplicas: 3}
	}
	mig := &pb.Sample{TsNs: 1e18, IntervalNs: 1e8, InstanceId: "MIG-y", Kind: pb.Kind_KIND_MIG, GpuUuid: "GPU-y", GpuIndex: 1, PowerWatts: 200, SmActive: 0.5}
	tests := []struct {
		name string
		sm   [3]float64
		want [3]float64
	}{
		{"by SM activity", [3]float64{0.5, 0.25, 0}, [3]float64{200, 100, 0}},
		{"all idle: equal parts", [3]float64{0, 0, 0}, [3]float64{100, 100, 100}},
		{"one busy", [3]float64{0, 0.1, 0}, [3]float64{0, 300, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Options{})
			smp := []*pb.Sample{mig}
			for i, sm := range tt.sm {
				smp = append(smp, share(fmt.Sprintf("GPU-x::%d", i), sm))
			}
			if err := c.Write(context.Background(), time.Unix(1e9, 0), []exporter.NodeSamples{{Node: "n", Samples: smp}}); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			text := exposition(t, reg)
			var sum float64
			for i, w := range tt.want {
				line := fmt.Sprintf(`slicemeter_instance_power_estimate_watts{gpu="0",kind="share",model="H100-SXM5-80GB",node="n",profile="",slice="GPU-x::%d",uuid="GPU-x"} %s`,
					i, strconv.FormatFloat(w, 'g', -1, 64))
				if !strings.Contains(text, line+"\n") {
					t.Errorf("no %s in\n%s", line, grep(text, "power"))
				}
				sum += w
			}
			if sum != 300 {
				t.Errorf("estimates sum to %v, want the GPU's 300 W", sum)
			}
			if n := strings.Count(text, "slicemeter_instance_power_estimate_watts{"); n != 3 {
				t.Errorf("%d estimate series, want one per replica (3), none for the MIG instance", n)
			}
		})
	}
}

func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
