package summary

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestSummaryMeans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary.json")
	s := New(path)
	ctx := context.Background()
	t0 := time.Unix(100, 0)
	ticks := []struct {
		util, power, sm float64
		energy          float64
		failed          bool
	}{{0.2, 100, 0.1, 10, false}, {0.6, 300, 0.5, 40, false}, {0, 0, 0, 0, true}}
	for i, tk := range ticks {
		ns := exporter.NodeSamples{Node: "n", GPUs: []exporter.GPUState{{UUID: "GPU-1", Model: "H200-SXM-141GB",
			Utilization: tk.util, PowerWatts: tk.power, EnergyJ: tk.energy, UtilSamples: 2, Failed: tk.failed,
			Instances: []exporter.InstanceActivity{{InstanceID: "GPU-1", HasGPM: true}}}}}
		if !tk.failed {
			ns.Samples = []*pb.Sample{{InstanceId: "GPU-1", Kind: pb.Kind_KIND_GPU, SmActive: tk.sm, Attached: i == 1}}
		}
		if err := s.Write(ctx, t0.Add(time.Duration(i)*100*time.Millisecond), []exporter.NodeSamples{ns}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	g := r.GPUs[0]
	if r.Ticks != 3 || g.Ticks != 2 || g.FailedTicks != 1 || g.UtilizationMean != 0.4 || g.PowerMeanW != 200 ||
		g.EnergyJ != 30 || g.DriverSamples != 4 || !g.GPM || g.UtilizationMax != 0.6 {
		t.Errorf("gpu summary %+v (run %+v)", g, r)
	}
	in := r.Instances[0]
	if in.Samples != 2 || math.Abs(in.SMActiveMean-0.3) > 1e-12 || in.Attached != 1 || in.Kind != "gpu" {
		t.Errorf("instance summary %+v", in)
	}
}
