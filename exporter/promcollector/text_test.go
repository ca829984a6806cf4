package promcollector

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// registryText is what the registry's Gather, encoded by expfmt, serves of col alone in format.
func registryText(t *testing.T, col *Collector, format expfmt.Format) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// AppendText is the registry's exposition byte for byte, in the text format and in OpenMetrics
// (less the "# EOF" the handler closes the body with): every public scenario's fleet, the golden
// node with every health field, and a snapshot of hostile values (label values with quotes,
// backslashes, new lines and bytes that are not UTF-8; NaN, infinities, -0, ±1, huge and tiny
// numbers).
func TestTextEqualsRegistry(t *testing.T) {
	snapshots := map[string]*Collector{"hostile": hostileSnapshot(t)}
	for _, name := range []string{"mig-basic", "outage-coldstart", "share-timeslice", "vgpu-phase", "vgpu-timeslice"} {
		snapshots[name], _ = fleet(t, name)
	}
	snapshots["health"] = goldenSnapshot(t, true)
	for name, col := range snapshots {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				format expfmt.Format
				om     bool
			}{
				{expfmt.NewFormat(expfmt.TypeTextPlain), false},
				{expfmt.NewFormat(expfmt.TypeOpenMetrics), true},
			} {
				want := registryText(t, col, tc.format) // without # EOF: the encoder's Close writes it
				got := string(col.AppendText(nil, tc.om))
				if got != want {
					t.Errorf("openMetrics %v: AppendText differs from the registry's exposition:\n%s", tc.om, lineDiff(want, got))
				}
				if len(want) < 200 {
					t.Errorf("openMetrics %v: only %d bytes: %q", tc.om, len(want), want)
				}
			}
		})
	}
}

// hostileSnapshot is one GPU with a vGPU instance whose strings and values are the awkward ones.
func hostileSnapshot(t *testing.T) *Collector {
	t.Helper()
	col := New(Options{})
	values := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1, -1, 0, 1e300, 5e-324, 123456789012, 0.1, 3}
	for i, v := range values {
		model := "A100 \"SXM4\" \\ 40GB\nx"
		smp := &pb.Sample{
			TsNs: uint64(1.7e18) + uint64(i), GpuIndex: 0, GpuUuid: "GPU-\xff\xfe", Model: model, Kind: pb.Kind_KIND_VGPU,
			InstanceId: "vgpu\"0\"", Profile: "A100-4C\\", Attached: i%2 == 0, SmActive: v, PowerWatts: v,
			MemUsedBytes: uint64(i) << 30, MemTotalBytes: 4 << 30, GpuSmCount: 108, GpuMemTotalBytes: 40 << 30,
			IntervalNs: 1e8, Vgpu: &pb.VgpuSchedule{RunNs: 5e7, SwitchNs: 1e6, WaitsNs: []uint64{1e6, 2e6}},
		}
		st := exporter.GPUState{Index: 0, UUID: "GPU-\xff\xfe", Model: model, PCIBusID: "00000000:17:00.0", PowerWatts: v,
			Utilization: v, TempC: v, EnergyJ: float64(i) * 1e6, ActivityAvailable: true, Health: allHealth(),
			Instances: []exporter.InstanceActivity{{InstanceID: "vgpu\"0\"", VMID: "vm\n1", VGPUType: "A100-4C", HasDriverSMUtil: true, DriverSMUtil: v}}}
		st.Health.DriverVersion = "580\xc3"
		if err := col.Write(context.Background(), time.Unix(0, int64(smp.TsNs)), []exporter.NodeSamples{
			{Node: "node \"a\"", Samples: []*pb.Sample{smp}, GPUs: []exporter.GPUState{st}}}); err != nil {
			t.Fatal(err)
		}
		got := string(col.AppendText(nil, false))
		if want := registryText(t, col, expfmt.NewFormat(expfmt.TypeTextPlain)); got != want {
			t.Fatalf("value %v: AppendText differs from the registry's exposition:\n%s", v, lineDiff(want, got))
		}
	}
	if text := string(col.AppendText(nil, false)); !strings.Contains(text, "uuid=\"GPU-\uFFFD\"") {
		t.Errorf("a uuid that is not UTF-8 is not served with U+FFFD:\n%s", text)
	}
	return col
}

// goldenSnapshot is TestGoldenExposition's node after its ticks.
func goldenSnapshot(t *testing.T, health bool) *Collector {
	t.Helper()
	col, _ := goldenRun(t, health)
	return col
}
