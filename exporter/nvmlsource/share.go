package nvmlsource

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Share instances: a GPU that the device plugin hands out as time-sliced or MPS replicas is
// sampled as one instance per replica (schemas/README.md, "Instances"), from two NVML calls per tick:
// per-process utilization since the previous tick and the running processes with their memory,
// each process counted on the replica that Config.Shares maps it to. NVML has no per-process
// utilization on MIG GPUs, so a MIG GPU is never sampled as shares.

// sharedGPU says whether g is sampled as share instances this tick, and how it is shared.
func (s *Source) sharedGPU(g *gpuDev) (exporter.Share, bool) {
	if s.cfg.Shares == nil || g.mig || len(g.vgpus) > 0 {
		return exporter.Share{}, false
	}
	sh := s.cfg.Shares.Share(g.uuid)
	if sh.Replicas < 1 || len(sh.IDs) == 0 || sh.Replica == nil {
		return exporter.Share{}, false
	}
	return sh, true
}

// replicaUse is what one replica's processes did in the tick.
type replicaUse struct {
	sm    float64 // Σ of its processes' SM utilization, 0..1 of the GPU's time
	mem   uint64
	procs int
}

func (s *Source) readShare(dst []*pb.Sample, g *gpuDev, sh exporter.Share, st *exporter.GPUState, base *pb.Sample) []*pb.Sample {
	use := make(map[string]*replicaUse, len(sh.IDs))
	for _, id := range sh.IDs {
		use[id] = &replicaUse{}
	}
	// A process of no known replica (another container, a process outside Kubernetes) is the
	// GPU's time, not a tenant's: it is left out of every replica.
	util, measured := s.processUtilization(g)
	for pid, sm := range util {
		if id, ok := sh.Replica(pid); ok && use[id] != nil {
			use[id].sm += sm
		}
	}
	for _, p := range s.runningProcesses(g) {
		if id, ok := sh.Replica(p.Pid); ok && use[id] != nil {
			if p.UsedGpuMemory != valueNotAvailable {
				use[id].mem += p.UsedGpuMemory
			}
			use[id].procs++
		}
	}
	memTotal := st.MemTotal / uint64(sh.Replicas)
	for _, id := range sh.IDs {
		u := use[id]
		smp := cloneBase(base)
		smp.Kind, smp.InstanceId, smp.ShareReplicas = pb.Kind_KIND_SHARE, id, uint32(sh.Replicas)
		smp.SmCount, smp.MemTotalBytes = g.sms, memTotal
		// A replica's processes may hold more than its nominal share of memory (time-slicing
		// does not partition it); the sample states at most the share, as the validator asks.
		smp.MemUsedBytes = min(u.mem, memTotal)
		smp.Attached = u.procs > 0
		smp.SmActive = min(1, max(0, u.sm))
		smp.SmActiveUnavailable = !measured
		st.Instances = append(st.Instances, exporter.InstanceActivity{InstanceID: id, Processes: u.procs})
		dst = append(dst, smp)
	}
	return dst
}

// processUtilization reads each process's SM utilization since the last read (0..1); ok is
// false where it could not be read (unsupported, or an error this tick), which the samples say
// as sm_active_unavailable rather than as idle. go-nvml's
// GetProcessUtilization sizes its buffer with a first call, which answers INSUFFICIENT_SIZE
// even when there is nothing to read (it then returns an empty slice with that code); NOT_FOUND
// means no sample since the timestamp. Both are an idle GPU, not an error. (Its newer
// GetProcessesUtilizationInfo passes NVML no array at all and always fails: not used.)
func (s *Source) processUtilization(g *gpuDev) (map[uint32]float64, bool) {
	out := map[uint32]float64{}
	if !g.can("nvmlDeviceGetProcessUtilization") {
		return out, false
	}
	samples, r := g.dev.GetProcessUtilization(g.lastProcTS)
	switch {
	case r == nvml.ERROR_NOT_FOUND, r == nvml.ERROR_INSUFFICIENT_SIZE && len(samples) == 0:
		s.count("nvmlDeviceGetProcessUtilization")
		return out, true
	case !s.ok(g, "nvmlDeviceGetProcessUtilization", r):
		// INSUFFICIENT_SIZE with samples: more processes appeared between go-nvml's sizing
		// call and its read; the next tick reads them (the timestamp did not move).
		return out, false
	}
	// NVML returns one sample per process, the mean of the driver's samples since the
	// timestamp; a process named twice (samples straddling the timestamp) is averaged.
	n := map[uint32]int{}
	for _, p := range samples {
		if p.Pid == 0 || p.TimeStamp <= g.lastProcTS {
			continue
		}
		out[p.Pid] += float64(min(p.SmUtil, 100)) / 100
		n[p.Pid]++
	}
	for _, p := range samples {
		g.lastProcTS = max(g.lastProcTS, p.TimeStamp)
	}
	for pid, k := range n {
		out[pid] /= float64(k)
	}
	return out, true
}

// valueNotAvailable is NVML's NVML_VALUE_NOT_AVAILABLE in ProcessInfo.UsedGpuMemory (a process
// whose memory the driver cannot tell, e.g. without the rights to see it).
const valueNotAvailable = ^uint64(0)

// runningProcesses reads the compute processes on the GPU with their memory.
func (s *Source) runningProcesses(g *gpuDev) []nvml.ProcessInfo {
	if !g.can("nvmlDeviceGetComputeRunningProcesses") {
		return nil
	}
	procs, r := g.dev.GetComputeRunningProcesses()
	if !s.ok(g, "nvmlDeviceGetComputeRunningProcesses", r) {
		return nil
	}
	return procs
}
