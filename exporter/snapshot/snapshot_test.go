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
	"github.com/slicemeter/slicemeter/exporter/publish"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// fleet samples the first 30 s of a public scenario into a fresh snapshot.
func fleet(t *testing.T, name string) (*Snapshot, *prometheus.Registry) {
	t.Helper()
	sc, err := scenario.Load("../../schemas/scenario/testdata/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := sim.New(sc, "")
	if err != nil {
		t.Fatal(err)
	}
	snap := New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(snap)
	loop := &exporter.Loop{Source: src, Clock: exporter.FastClock{}, Sinks: []exporter.Sink{snap},
		Start: sc.Start, End: sc.Start.Add(30 * time.Second), Interval: sc.Interval, Metrics: exporter.NewLoopMetrics(reg)}
	if _, err := loop.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	publish.New(nil, "t", reg, nil) // its metrics belong on the same endpoint
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
