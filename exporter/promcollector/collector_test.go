package promcollector

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/exporter/publish"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// simulated is a public scenario's simulated fleet and a fresh collector, both registered.
func simulated(t *testing.T, name string) (*scenario.Scenario, *sim.Source, *Collector, *prometheus.Registry) {
	t.Helper()
	sc, err := scenario.Load("../../schemas/scenario/testdata/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	src, err := sim.New(sc, "", sim.Options{Metrics: nvmlsource.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	snap := New(Options{})
	reg.MustRegister(snap)
	return sc, src, snap, reg
}

// fleet samples the first 30 s of a public scenario into a fresh snapshot.
func fleet(t *testing.T, name string) (*Collector, *prometheus.Registry) {
	t.Helper()
	sc, src, snap, reg := simulated(t, name)
	loop := &exporter.Loop{Source: src, Clock: exporter.FastClock{}, Sinks: []exporter.Sink{snap},
		Start: sc.Start, End: sc.Start.Add(30 * time.Second), Interval: sc.Interval, Metrics: exporter.NewLoopMetrics(reg)}
	if _, err := loop.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The publisher's and the spool's metrics belong on the same endpoint.
	pub, err := publish.New(nil, "t", reg, nil, publish.Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
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
		`slicemeter_instance_info{gpu="0",gpu_instance_id="",kind="vgpu",model="H100-SXM5-80GB",node="node-v",profile="H100-20C",slice="gpu0/vgpu3"`,
		`slicemeter_instance_memory_total_bytes{gpu="0",kind="vgpu",model="H100-SXM5-80GB",node="node-v",profile="H100-20C",slice="gpu0/vgpu0"`,
		`slicemeter_exporter_instances{node="node-v"} 4`,
		`slicemeter_exporter_samples_total 1200`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
	// From 20 s on three vGPUs are busy: each waits 2 timeslices + 3 switches = 4.06 ms.
	waits := testutil.CollectAndCount(New(Options{}), "slicemeter_vgpu_scheduling_waits_total")
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
	snap := New(Options{})
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
	checkSeries(t, text, []seriesWant{
		{`slicemeter_instance_sm_active_ratio{gpu="0"`, false},
		{`slicemeter_instance_sm_active_ratio{gpu="1"`, true},
		{`slicemeter_gpu_instance_activity_available{gpu="0",model="A100-SXM4-40GB",node="n",uuid="GPU-1"} 0`, true},
		{`slicemeter_instance_processes{gpu="0",kind="mig",model="A100-SXM4-40GB",node="n",profile="1g.5gb",slice="MIG-1",uuid="GPU-1"} 2`, true},
		{`slicemeter_gpu_xid_errors_total{gpu="1",model="A100-SXM4-40GB",node="n",uuid="GPU-2"} 3`, true},
		{`slicemeter_gpu_last_xid{gpu="1",model="A100-SXM4-40GB",node="n",uuid="GPU-2"} 79`, true},
	})
}

// The nvml source flags a MIG instance whose activity could not be measured (sm_active_unavailable)
// even where no GPU state says so (a replayed capture, a GPU state not yet written): the flag
// alone keeps its sm_active from being served as 0.
func TestSmActiveUnavailableFlagIsNotServed(t *testing.T) {
	snap := New(Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(snap)
	flagged := &pb.Sample{GpuUuid: "GPU-1", Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_MIG, InstanceId: "MIG-1", Profile: "1g.5gb", SmActiveUnavailable: true}
	measured := &pb.Sample{GpuUuid: "GPU-1", Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_MIG, InstanceId: "MIG-2", Profile: "1g.5gb", SmActive: 0.5}
	if err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: "n", Samples: []*pb.Sample{flagged, measured}}}); err != nil {
		t.Fatal(err)
	}
	text := exposition(t, reg)
	if strings.Contains(text, `slicemeter_instance_sm_active_ratio{gpu="0",kind="mig",model="A100-SXM4-40GB",node="n",profile="1g.5gb",slice="MIG-1"`) {
		t.Errorf("the flagged instance's sm_active is served:\n%s", text)
	}
	if !strings.Contains(text, `slicemeter_instance_sm_active_ratio{gpu="0",kind="mig",model="A100-SXM4-40GB",node="n",profile="1g.5gb",slice="MIG-2",uuid="GPU-1"} 0.5`) {
		t.Errorf("the measured instance's sm_active is missing:\n%s", text)
	}
}

// Label pairs are built when an instance or a GPU first appears; a later sample that changes its
// labels (a MIG instance re-created with another profile, a vGPU moved to another VM, a GPU
// replaced) must show the new labels, and the old series must go.
func TestChangedLabelsReplaceTheSeries(t *testing.T) {
	snap := New(Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(snap)
	write := func(profile, vm, uuid string) string {
		t.Helper()
		smp := &pb.Sample{GpuUuid: uuid, Model: "H100-SXM5-80GB", Kind: pb.Kind_KIND_VGPU, InstanceId: "vgpu0", Profile: profile,
			Vgpu: &pb.VgpuSchedule{RunNs: 250e6, WaitsNs: []uint64{1e6, 2e6}}}
		err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: "n", Samples: []*pb.Sample{smp},
			GPUs: []exporter.GPUState{{UUID: uuid, Model: "H100-SXM5-80GB", ActivityAvailable: true,
				Instances: []exporter.InstanceActivity{{InstanceID: "vgpu0", VMID: vm, VGPUType: profile}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return exposition(t, reg)
	}
	write("H100-10C", "vm-1", "GPU-A")
	write("H100-20C", "vm-1", "GPU-B")
	text := write("H100-20C", "vm-2", "GPU-B") // only the VM changes
	checkSeries(t, text, []seriesWant{
		{`profile="H100-10C"`, false},
		{`vm_id="vm-1"`, false},
		{`uuid="GPU-A"`, false},
		{`slicemeter_vgpu_info{gpu="0",kind="vgpu",model="H100-SXM5-80GB",node="n",profile="H100-20C",slice="vgpu0",uuid="GPU-B",vgpu_type="H100-20C",vm_id="vm-2"} 1`, true},
		{`slicemeter_gpu_up{gpu="0",model="H100-SXM5-80GB",node="n",uuid="GPU-B"} 1`, true},
		{`slicemeter_gpu_ecc_errors_total{gpu="0",model="H100-SXM5-80GB",node="n",type="corrected",uuid="GPU-B"} 0`, true},
		// The vGPU's counters keep counting across the change: the instance is the same.
		{`slicemeter_vgpu_scheduling_waits_total{gpu="0",kind="vgpu",model="H100-SXM5-80GB",node="n",profile="H100-20C",slice="vgpu0",uuid="GPU-B"} 6`, true},
		{`slicemeter_vgpu_run_seconds_total{gpu="0",kind="vgpu",model="H100-SXM5-80GB",node="n",profile="H100-20C",slice="vgpu0",uuid="GPU-B"} 0.75`, true},
		{`slicemeter_exporter_instances{node="n"} 1`, true},
	})
}

// A GPU state that no longer lists an instance (or a GPU that failed) takes that instance's
// activity series away; the instance's own series stay.
func TestActivityFollowsTheLatestGPUState(t *testing.T) {
	snap := New(Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(snap)
	smp := &pb.Sample{GpuUuid: "GPU-1", Model: "H100-SXM5-80GB", Kind: pb.Kind_KIND_MIG, InstanceId: "MIG-1", Profile: "1g.10gb", SmActive: 0.5}
	processes := `slicemeter_instance_processes{gpu="0",kind="mig",model="H100-SXM5-80GB",node="n",profile="1g.10gb",slice="MIG-1",uuid="GPU-1"} 3`
	occupancy := `slicemeter_instance_sm_occupancy_ratio{gpu="0",kind="mig",model="H100-SXM5-80GB",node="n",profile="1g.10gb",slice="MIG-1",uuid="GPU-1"} 0.25`
	info := `slicemeter_instance_info{gpu="0",gpu_instance_id="",kind="mig",model="H100-SXM5-80GB",node="n",profile="1g.10gb",slice="MIG-1",uuid="GPU-1"} 1`
	for _, tc := range []struct {
		name  string
		state exporter.GPUState
		want  map[string]bool
	}{
		{"listed", exporter.GPUState{UUID: "GPU-1", Model: "H100-SXM5-80GB", ActivityAvailable: true,
			Instances: []exporter.InstanceActivity{{InstanceID: "MIG-1", Processes: 3, HasGPM: true, SMOccupancy: 0.25}}},
			map[string]bool{processes: true, occupancy: true, info: true}},
		{"not listed", exporter.GPUState{UUID: "GPU-1", Model: "H100-SXM5-80GB", ActivityAvailable: true},
			map[string]bool{processes: false, occupancy: false, info: true}},
		{"listed again", exporter.GPUState{UUID: "GPU-1", Model: "H100-SXM5-80GB", ActivityAvailable: true,
			Instances: []exporter.InstanceActivity{{InstanceID: "MIG-1", Processes: 3}}},
			map[string]bool{processes: true, occupancy: false, info: true}},
		{"failed", exporter.GPUState{UUID: "GPU-1", Model: "H100-SXM5-80GB", Failed: true,
			Instances: []exporter.InstanceActivity{{InstanceID: "MIG-1", Processes: 3}}},
			map[string]bool{processes: false, occupancy: false, info: true}},
	} {
		err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: "n", Samples: []*pb.Sample{smp}, GPUs: []exporter.GPUState{tc.state}}})
		if err != nil {
			t.Fatal(err)
		}
		text := exposition(t, reg)
		for series, want := range tc.want {
			if strings.Contains(text, series) != want {
				t.Errorf("%s: %s present: %v, want %v", tc.name, series, !want, want)
			}
		}
	}
}

// Collect emits every family's series in the order the registry sorts them, so that a scrape's
// sort finds them sorted; the exposition must be the same as from unsorted series.
func TestCollectEmitsSortedSeries(t *testing.T) {
	snap, _ := fleet(t, "mig-basic")
	for _, name := range []string{"vgpu-timeslice", "outage-coldstart"} {
		other, _ := fleet(t, name)
		for _, in := range other.instances {
			if err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: in.key.node, Samples: []*pb.Sample{in.smp}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// GPU indexes sort as strings: "10" before "2".
	for _, i := range []uint32{2, 10, 1} {
		uuid := fmt.Sprintf("GPU-%d", i)
		err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: "n", Samples: []*pb.Sample{
			{GpuIndex: i, GpuUuid: uuid, Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_GPU, InstanceId: uuid}},
			GPUs: []exporter.GPUState{{Index: i, UUID: uuid, Model: "A100-SXM4-40GB", Health: allHealth()}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	ch := make(chan prometheus.Metric)
	go func() { snap.Collect(ch); close(ch) }()
	last := map[string]*dto.Metric{}
	n := 0
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		name := m.Desc().String()
		if prev := last[name]; prev != nil && compareLabels(&labelSet{pairs: prev.Label}, &labelSet{pairs: out.Label}) >= 0 {
			t.Errorf("%s: %v emitted after %v", name, out.Label, prev.Label)
		}
		last[name] = &out
		n++
	}
	if n < 100 {
		t.Fatalf("only %d series", n)
	}
}

// Scrapes run while the loop writes: a scrape must see each series whole, and the race detector
// (go test -race) must find nothing shared between a scrape's metrics and the next tick.
func TestScrapeWhileWriting(t *testing.T) {
	sc, src, snap, reg := simulated(t, "vgpu-timeslice")
	done := make(chan error)
	go func() {
		defer close(done)
		for n := range 200 {
			tick := sc.Start.Add(time.Duration(n) * sc.Interval)
			out, err := src.Read(context.Background(), tick, sc.Interval)
			if err == nil {
				err = snap.Write(context.Background(), tick, out)
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	for scraping := true; scraping; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			scraping = false
		default:
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				if len(m.Label) == 0 && strings.HasPrefix(mf.GetName(), "slicemeter_instance_") {
					t.Fatalf("%s without labels", mf.GetName())
				}
			}
		}
	}
}

// BenchmarkWriteNode72 is the snapshot's share of a tick of the 72-instance node (the sink
// write, not the source read): it runs 10 times a second, so it must stay a map lookup and a
// few compares per instance.
func BenchmarkWriteNode72(b *testing.B) {
	sc, err := scenario.Load("../testdata/node72.yaml")
	if err != nil {
		b.Fatal(err)
	}
	src, err := sim.New(sc, "", sim.Options{Metrics: nvmlsource.NewMetrics(nil)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ticks := make([][]exporter.NodeSamples, 10)
	for n := range ticks {
		if ticks[n], err = src.Read(ctx, sc.Start.Add(time.Duration(n)*sc.Interval), sc.Interval); err != nil {
			b.Fatal(err)
		}
	}
	snap := New(Options{})
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := snap.Write(ctx, sc.Start, ticks[n%len(ticks)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// An instance or GPU absent from every Write for longer than the forget period leaves
// /metrics (a MIG layout changed, a vGPU destroyed); one absent for less stays.
func TestForgetsWhatIsGone(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	smp := func(id string, gpu uint32) *pb.Sample {
		return &pb.Sample{GpuUuid: fmt.Sprintf("GPU-%d", gpu), GpuIndex: gpu, Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_MIG, InstanceId: id, Profile: "3g.20gb"}
	}
	state := func(gpu uint32) exporter.GPUState {
		return exporter.GPUState{Index: gpu, UUID: fmt.Sprintf("GPU-%d", gpu), Model: "A100-SXM4-40GB", ActivityAvailable: true}
	}
	for _, tc := range []struct {
		name     string
		forget   time.Duration
		at       time.Duration // of the second Write, which carries MIG-a of GPU 0 only
		wantMIGb bool          // MIG-b and GPU 1 still served
	}{
		{"absent for less than the period", 5 * time.Minute, 4 * time.Minute, true},
		{"absent for exactly the period", 5 * time.Minute, 5 * time.Minute, true},
		{"absent for longer", 5 * time.Minute, 5*time.Minute + time.Second, false},
		{"never forgets", -1, 24 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := New(Options{Forget: tc.forget})
			reg := prometheus.NewRegistry()
			reg.MustRegister(snap)
			ctx := context.Background()
			if err := snap.Write(ctx, t0, []exporter.NodeSamples{{Node: "n", Samples: []*pb.Sample{smp("MIG-a", 0), smp("MIG-b", 1)},
				GPUs: []exporter.GPUState{state(0), state(1)}}}); err != nil {
				t.Fatal(err)
			}
			if err := snap.Write(ctx, t0.Add(tc.at), []exporter.NodeSamples{{Node: "n", Samples: []*pb.Sample{smp("MIG-a", 0)},
				GPUs: []exporter.GPUState{state(0)}}}); err != nil {
				t.Fatal(err)
			}
			text := exposition(t, reg)
			for series, want := range map[string]bool{
				`slicemeter_instance_info{gpu="0",gpu_instance_id="",kind="mig",model="A100-SXM4-40GB",node="n",profile="3g.20gb",slice="MIG-a",uuid="GPU-0"} 1`: true,
				`slicemeter_instance_info{gpu="1",gpu_instance_id="",kind="mig",model="A100-SXM4-40GB",node="n",profile="3g.20gb",slice="MIG-b",uuid="GPU-1"} 1`: tc.wantMIGb,
				`slicemeter_gpu_up{gpu="1",model="A100-SXM4-40GB",node="n",uuid="GPU-1"} 1`:                                                                      tc.wantMIGb,
				`slicemeter_exporter_instances{node="n"} 2`: tc.wantMIGb,
				`slicemeter_exporter_instances{node="n"} 1`: !tc.wantMIGb,
			} {
				if got := strings.Contains(text, series+"\n"); got != want {
					t.Errorf("%s served: %v, want %v\n%s", series, got, want, text)
				}
			}
		})
	}
}

// seriesWant is a series (a prefix of its exposition line, or the line) and whether it must be there.
type seriesWant struct {
	series string
	want   bool
}

func checkSeries(t *testing.T, text string, tests []seriesWant) {
	t.Helper()
	for _, tc := range tests {
		if strings.Contains(text, tc.series) != tc.want {
			t.Errorf("series %s present: %v, want %v\n%s", tc.series, !tc.want, tc.want, text)
		}
	}
}
