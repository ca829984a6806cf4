package sim

import (
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Shared GPUs (scenario `share`): each replica is an instance whose tenant runs one process
// while attached. The simulated NVML reports those processes (per-process utilization and
// memory) as a real time-sliced or MPS GPU does, and shares tells the nvml source which
// process runs on which replica, as Kubernetes does from the pods' cgroups.

// shares is a node's exporter.Shares, from the scenario; uuids: the replicas are named as the
// device plugin names them (scenario `ids: uuid`).
type shares struct {
	n     *node
	uuids bool
}

var _ exporter.Shares = shares{}

// Share says how the GPU with uuid is shared; Replicas 0 for a GPU that is not.
func (s shares) Share(uuid string) exporter.Share {
	for _, g := range s.n.gpus {
		if g.uuid != uuid || g.instances[0].kind != pb.Kind_KIND_SHARE {
			continue
		}
		ids := make([]string, len(g.instances))
		pids := make(map[uint32]string, len(g.instances))
		for i, inst := range g.instances {
			ids[i] = inst.id
			if s.uuids {
				ids[i] = inst.uuid
			}
			pids[inst.pid] = ids[i]
		}
		return exporter.Share{Replicas: len(g.instances), IDs: ids, Replica: func(pid uint32) (string, bool) {
			id, ok := pids[pid]
			return id, ok
		}}
	}
	return exporter.Share{}
}

func (g *gpu) shared() bool { return g.instances[0].kind == pb.Kind_KIND_SHARE }

// shareProcesses are the processes on a shared GPU at offset d, with their memory.
func (g *gpu) shareProcesses(d time.Duration) []nvml.ProcessInfo {
	out := []nvml.ProcessInfo{}
	for _, inst := range g.instances {
		if _, ok := inst.attachedAt(d); ok {
			out = append(out, nvml.ProcessInfo{Pid: inst.pid, UsedGpuMemory: inst.memUsed(d)})
		}
	}
	return out
}

// processUtilization is nvmlDeviceGetProcessUtilization on a shared GPU: one sample per process
// that used the SMs in the tick that ends at now (µs), if newer than last. As go-nvml's wrapper
// does, nothing to report is an empty slice with INSUFFICIENT_SIZE (its sizing call's answer).
func (g *gpu) processUtilization(d time.Duration, nowUS, last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	if nowUS <= last {
		return nil, nvml.ERROR_NOT_FOUND
	}
	var out []nvml.ProcessUtilizationSample
	for _, inst := range g.instances {
		if _, ok := inst.attachedAt(d); !ok {
			continue
		}
		if pct := uint32(math.Round(100 * inst.sm(d))); pct > 0 {
			out = append(out, nvml.ProcessUtilizationSample{Pid: inst.pid, TimeStamp: nowUS, SmUtil: pct})
		}
	}
	if len(out) == 0 {
		return []nvml.ProcessUtilizationSample{}, nvml.ERROR_INSUFFICIENT_SIZE
	}
	return out, nvml.SUCCESS
}
