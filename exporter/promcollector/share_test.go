package promcollector

import (
	"testing"
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
