package nvmlsource

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// testShares shares GPU-0 as replicas r0..r3; pids 10, 11 run on r0, pid 20 on r2, pid 99 on none.
type testShares struct{}

func (testShares) Share(uuid string) exporter.Share {
	if uuid != "GPU-0" && uuid != "GPU-2" {
		return exporter.Share{}
	}
	return exporter.Share{Replicas: 4, IDs: []string{"r0", "r1", "r2", "r3"}, Replica: func(pid uint32) (string, bool) {
		switch pid {
		case 10, 11:
			return "r0", true
		case 20:
			return "r2", true
		}
		return "", false
	}}
}

func TestShareInstances(t *testing.T) {
	type call struct {
		samples []nvml.ProcessUtilizationSample
		r       nvml.Return
	}
	for _, tc := range []struct {
		name      string
		util      call
		procs     []nvml.ProcessInfo
		wantSM    [4]float64
		wantMem   [4]uint64
		attached  [4]bool
		available bool
	}{
		{
			name: "summed per replica, other processes left out",
			util: call{[]nvml.ProcessUtilizationSample{
				{Pid: 10, TimeStamp: 5, SmUtil: 30}, {Pid: 11, TimeStamp: 5, SmUtil: 25}, {Pid: 20, TimeStamp: 6, SmUtil: 40},
				{Pid: 99, TimeStamp: 6, SmUtil: 100},
			}, nvml.SUCCESS},
			procs:  []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 1 << 30}, {Pid: 11, UsedGpuMemory: 2 << 30}, {Pid: 20, UsedGpuMemory: 3 << 30}, {Pid: 99, UsedGpuMemory: 5 << 30}},
			wantSM: [4]float64{0.55, 0, 0.40, 0}, wantMem: [4]uint64{3 << 30, 0, 3 << 30, 0},
			attached: [4]bool{true, false, true, false}, available: true,
		},
		{
			name:     "clamped to 1 and to the replica's memory",
			util:     call{[]nvml.ProcessUtilizationSample{{Pid: 10, TimeStamp: 5, SmUtil: 80}, {Pid: 11, TimeStamp: 5, SmUtil: 70}}, nvml.SUCCESS},
			procs:    []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 20 << 30}, {Pid: 20, UsedGpuMemory: valueNotAvailable}},
			wantSM:   [4]float64{1, 0, 0, 0},
			wantMem:  [4]uint64{10 << 30, 0, 0, 0},
			attached: [4]bool{true, false, true, false}, available: true,
		},
		{
			// go-nvml's sizing call answers INSUFFICIENT_SIZE with no samples when nothing ran.
			name: "idle: INSUFFICIENT_SIZE without samples", util: call{[]nvml.ProcessUtilizationSample{}, nvml.ERROR_INSUFFICIENT_SIZE},
			procs: []nvml.ProcessInfo{{Pid: 20, UsedGpuMemory: 1 << 30}}, wantMem: [4]uint64{0, 0, 1 << 30, 0},
			attached: [4]bool{false, false, true, false}, available: true,
		},
		{
			name: "idle: NOT_FOUND", util: call{nil, nvml.ERROR_NOT_FOUND}, available: true,
		},
		{
			name: "unsupported: measured by nobody", util: call{nil, nvml.ERROR_NOT_SUPPORTED}, available: false,
		},
		{
			// More processes between go-nvml's sizing call and its read: not idle, unmeasured.
			name: "grew between the calls", util: call{[]nvml.ProcessUtilizationSample{{Pid: 10, TimeStamp: 5, SmUtil: 30}}, nvml.ERROR_INSUFFICIENT_SIZE},
			procs: []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 1 << 30}}, wantMem: [4]uint64{1 << 30, 0, 0, 0},
			attached: [4]bool{true, false, false, false}, available: false,
		},
		{
			name: "unknown error: unmeasured", util: call{nil, nvml.ERROR_UNKNOWN}, available: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := fakeGPU(0, new(bool), false)
			calls := 0
			var lastSeen []uint64
			dev.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
				calls++
				lastSeen = append(lastSeen, last)
				return tc.util.samples, tc.util.r
			}
			running := 0
			dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
				running++
				return tc.procs, nvml.SUCCESS
			}
			mig := fakeGPU(2, new(bool), true) // shared per Shares, but MIG: never sampled as shares
			now := time.Unix(1000, 0)
			src, err := Open(fakeLib([]nvml.Device{dev, fakeGPU(1, new(bool), false), mig}, ""), Config{Node: "n", Shares: testShares{}}, now)
			if err != nil {
				t.Fatal(err)
			}
			for tick := 1; tick <= 2; tick++ {
				out, err := src.Read(context.Background(), now.Add(time.Duration(tick)*time.Second), time.Second)
				if err != nil {
					t.Fatal(err)
				}
				ss := out[0].Samples
				if len(ss) != 6 {
					t.Fatalf("%d samples, want 4 replicas of GPU-0, GPU-1 whole, GPU-2's MIG instance", len(ss))
				}
				if ss[4].Kind != pb.Kind_KIND_GPU || ss[5].Kind != pb.Kind_KIND_MIG {
					t.Errorf("GPU-1 %v, GPU-2 %v: want whole and MIG, unshared", ss[4].Kind, ss[5].Kind)
				}
				for i, s := range ss[:4] {
					if s.Kind != pb.Kind_KIND_SHARE || s.InstanceId != []string{"r0", "r1", "r2", "r3"}[i] || s.ShareReplicas != 4 ||
						s.MemTotalBytes != 10<<30 || s.GpuMemTotalBytes != 40<<30 || s.GpuUuid != "GPU-0" {
						t.Errorf("replica %d: %v", i, s)
					}
					if tick == 1 && (abs(s.SmActive-tc.wantSM[i]) > 1e-12 || s.MemUsedBytes != tc.wantMem[i] || s.Attached != tc.attached[i]) {
						t.Errorf("replica %d: sm %g mem %d attached %v, want %g %d %v", i, s.SmActive, s.MemUsedBytes, s.Attached, tc.wantSM[i], tc.wantMem[i], tc.attached[i])
					}
					if s.SmActiveUnavailable == tc.available {
						t.Errorf("replica %d: sm_active_unavailable %v", i, s.SmActiveUnavailable)
					}
				}
				if tick == 2 && tc.util.r == nvml.SUCCESS {
					// The same samples again are not since the last read: nothing new.
					for i, s := range ss[:4] {
						if s.SmActive != 0 {
							t.Errorf("tick 2 replica %d: sm %g from samples already read", i, s.SmActive)
						}
					}
				}
			}
			wantCalls := 2
			if tc.util.r == nvml.ERROR_NOT_SUPPORTED {
				wantCalls = 1 // not asked again
			}
			// NVML calls stay bounded per shared GPU, however many replicas.
			if calls != wantCalls || running != 2 {
				t.Errorf("%d GetProcessUtilization and %d GetComputeRunningProcesses calls in 2 ticks, want %d and 2", calls, running, wantCalls)
			}
			latest := uint64(0)
			for _, p := range tc.util.samples {
				latest = max(latest, p.TimeStamp)
			}
			if tc.util.r == nvml.SUCCESS && (lastSeen[0] != 0 || lastSeen[1] != latest) {
				t.Errorf("timestamps asked %v, want 0 then the latest sample's (%d)", lastSeen, latest)
			}
		})
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
