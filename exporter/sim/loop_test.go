package sim

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// A looping scenario repeats its allocations and workloads every duration while the clock runs
// on: each instance's sample at offset d+k·duration says what it said at d, stamped later.
func TestLoopRepeatsTheWorkload(t *testing.T) {
	b, err := os.ReadFile("../capture/testdata/node.yaml") // 3 s: tenants arrive and leave
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse("loop.yaml", []byte(strings.Replace(string(b), "interval: 100ms\n", "interval: 100ms\nloop: true\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Loop {
		t.Fatal("loop: true not loaded")
	}
	src, err := New(sc, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		d  time.Duration
		id string
	}
	first := map[key]*pb.Sample{}
	ticks := int(sc.Duration / sc.Interval)
	compared, attached := 0, 0
	var lastTs uint64
	for n := 0; n < 3*ticks; n++ {
		d := time.Duration(n) * sc.Interval
		out, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range out {
			for _, s := range ns.Samples {
				if s.TsNs <= lastTs && s.InstanceId == "gpu0/mig0" {
					t.Fatalf("tick %d: timestamp %d not after %d", n, s.TsNs, lastTs)
				}
				if s.InstanceId == "gpu0/mig0" {
					lastTs = s.TsNs
				}
				k := key{d % sc.Duration, s.InstanceId}
				if n < ticks {
					first[k] = s
					continue
				}
				f := first[k]
				if f == nil {
					t.Fatalf("tick %d: %s was not sampled in the first repetition", n, s.InstanceId)
				}
				if s.Attached != f.Attached || s.SmActive != f.SmActive || s.MemUsedBytes != f.MemUsedBytes {
					t.Errorf("tick %d %s: attached %v sm %v mem %d; at %v in the first repetition: %v %v %d",
						n, s.InstanceId, s.Attached, s.SmActive, s.MemUsedBytes, k.d, f.Attached, f.SmActive, f.MemUsedBytes)
				}
				compared++
				if s.Attached {
					attached++
				}
			}
		}
	}
	if compared != 2*ticks*src.Instances() || attached == 0 {
		t.Errorf("%d samples compared (%d attached), want %d with some attached", compared, attached, 2*ticks*src.Instances())
	}
}
