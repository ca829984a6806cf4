package snapshot

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/exporter/publish"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/exporter/spool"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// fleet samples the first 30 s of a public scenario into a fresh snapshot.
func fleet(t *testing.T, name string) (*Snapshot, *prometheus.Registry) {
	t.Helper()
	sc, err := scenario.Load("../../schemas/scenario/testdata/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	src, err := sim.NewWithMetrics(sc, "", nvmlsource.NewMetrics(reg), nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := New()
	reg.MustRegister(snap)
	loop := &exporter.Loop{Source: src, Clock: exporter.FastClock{}, Sinks: []exporter.Sink{snap},
		Start: sc.Start, End: sc.Start.Add(30 * time.Second), Interval: sc.Interval, Metrics: exporter.NewLoopMetrics(reg)}
	if _, err := loop.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	// The publisher's and the spool's metrics belong on the same endpoint.
	publish.NewWithOptions(nil, "t", reg, nil, publish.Options{Spool: sp})
	return snap, reg
}

func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed")
		}
		t.Fatal("promtool not found: run make deps (Debian package prometheus)")
	}
	for _, name := range []string{"vgpu-timeslice", "mig-basic"} {
		_, reg := fleet(t, name)
		text := exposition(t, reg)
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: promtool check metrics: %v\n%s", name, err, out)
		}
		for _, forbidden := range []string{`instance="`, `tenant="`} {
			if strings.Contains(text, forbidden) {
				t.Errorf("%s: exposition has the label %s (Prometheus owns instance; the exporter is tenant-agnostic)", name, forbidden)
			}
		}
	}
}

func TestSnapshotValues(t *testing.T) {
	_, reg := fleet(t, "vgpu-timeslice")
	text := exposition(t, reg)
	for _, want := range []string{
		`slicemeter_instance_info{gpu="0",kind="vgpu",model="H100-SXM5-80GB",node="node-v",profile="H100-20C",slice="gpu0/vgpu3"`,
		`slicemeter_instance_memory_total_bytes{gpu="0",kind="vgpu",model="H100-SXM5-80GB",node="node-v",profile="H100-20C",slice="gpu0/vgpu0"`,
		`slicemeter_exporter_instances{node="node-v"} 4`,
		`slicemeter_exporter_samples_total 1200`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
	// From 20 s on three vGPUs are busy: each waits 2 timeslices + 3 switches = 4.06 ms.
	waits := testutil.CollectAndCount(New(), "slicemeter_vgpu_scheduling_waits_total")
	if waits != 0 {
		t.Errorf("an empty snapshot emits %d wait series", waits)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "slicemeter_instance_attached{") && strings.Contains(line, `slice="gpu0/vgpu3"`) && !strings.HasSuffix(line, " 0") {
			t.Errorf("t4 attaches at 35 s, yet after 30 s: %s", line)
		}
		if strings.HasPrefix(line, "slicemeter_instance_attached{") && strings.Contains(line, `slice="gpu0/vgpu0"`) && !strings.HasSuffix(line, " 1") {
			t.Errorf("t1 attached at 20 s, yet: %s", line)
		}
	}
}

// A MIG instance on a GPU without GPM has no measured activity: it must not be served as 0.
func TestMIGActivityUnavailableIsNotServed(t *testing.T) {
	snap := New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(snap)
	mig := &pb.Sample{GpuUuid: "GPU-1", Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_MIG, InstanceId: "MIG-1", Profile: "1g.5gb"}
	whole := &pb.Sample{GpuUuid: "GPU-2", GpuIndex: 1, Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_GPU, InstanceId: "GPU-2", SmActive: 0.25}
	err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: "n", Samples: []*pb.Sample{mig, whole},
		GPUs: []exporter.GPUState{
			{Index: 0, UUID: "GPU-1", Model: "A100-SXM4-40GB", ActivityAvailable: false, Instances: []exporter.InstanceActivity{{InstanceID: "MIG-1", Processes: 2}}},
			{Index: 1, UUID: "GPU-2", Model: "A100-SXM4-40GB", ActivityAvailable: true, Failed: false, XIDs: 3, LastXID: 79},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	text := exposition(t, reg)
	for _, tc := range []struct {
		series string
		want   bool
	}{
		{`slicemeter_instance_sm_active_ratio{gpu="0"`, false},
		{`slicemeter_instance_sm_active_ratio{gpu="1"`, true},
		{`slicemeter_gpu_instance_activity_available{gpu="0",model="A100-SXM4-40GB",node="n",uuid="GPU-1"} 0`, true},
		{`slicemeter_instance_processes{gpu="0",kind="mig",model="A100-SXM4-40GB",node="n",profile="1g.5gb",slice="MIG-1",uuid="GPU-1"} 2`, true},
		{`slicemeter_gpu_xid_errors_total{gpu="1",model="A100-SXM4-40GB",node="n",uuid="GPU-2"} 3`, true},
		{`slicemeter_gpu_last_xid{gpu="1",model="A100-SXM4-40GB",node="n",uuid="GPU-2"} 79`, true},
	} {
		if strings.Contains(text, tc.series) != tc.want {
			t.Errorf("series %s present: %v, want %v\n%s", tc.series, !tc.want, tc.want, text)
		}
	}
}
