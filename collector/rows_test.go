package collector

import (
	"time"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// add appends one validated sample of node, from the generated protobuf type: the tests' way
// to build rows, and the fuzz test's independent counterpart of addWire.
func (c *sampleColumns) add(node string, s *pb.Sample) {
	ts := s.GetTsNs()
	c.time = append(c.time, time.Unix(int64(ts/1e9), 0).UTC()) // ts_ns truncated to seconds
	c.tsNs = append(c.tsNs, ts)
	c.intervalNs = append(c.intervalNs, s.GetIntervalNs())
	c.node = append(c.node, node)
	c.gpuUUID = append(c.gpuUUID, s.GetGpuUuid())
	c.gpuIndex = append(c.gpuIndex, s.GetGpuIndex())
	c.model = append(c.model, s.GetModel())
	c.kind = append(c.kind, s.GetKind().Label())
	c.instanceID = append(c.instanceID, s.GetInstanceId())
	c.profile = append(c.profile, s.GetProfile())
	c.attached = append(c.attached, boolUint8(s.GetAttached()))
	c.smActive = append(c.smActive, s.GetSmActive())
	c.memUsedBytes = append(c.memUsedBytes, s.GetMemUsedBytes())
	c.memTotalBytes = append(c.memTotalBytes, s.GetMemTotalBytes())
	c.powerWatts = append(c.powerWatts, s.GetPowerWatts())
	c.computeSlices = append(c.computeSlices, s.GetComputeSlices())
	c.smCount = append(c.smCount, s.GetSmCount())
	c.gpuSMCount = append(c.gpuSMCount, s.GetGpuSmCount())
	c.gpuMemTotalBytes = append(c.gpuMemTotalBytes, s.GetGpuMemTotalBytes())
	v := s.GetVgpu()
	c.vgpuRunNs = append(c.vgpuRunNs, v.GetRunNs())
	c.vgpuSwitchNs = append(c.vgpuSwitchNs, v.GetSwitchNs())
	waits := v.GetWaitsNs()
	if waits == nil {
		waits = []uint64{}
	}
	c.vgpuWaitsNs = append(c.vgpuWaitsNs, waits)
	c.smActiveUnavailable = append(c.smActiveUnavailable, boolUint8(s.GetSmActiveUnavailable()))
	c.shareReplicas = append(c.shareReplicas, s.GetShareReplicas())
	c.addEnergy(s.GetEnergyMj(), s.GetEnergyPrevMj(), s.GetEnergyUnavailable(), s.GetPowerWatts(), s.GetIntervalNs())
}
