package nvmlsource

import (
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/schemas/hardware"
)

type migDev struct {
	index    int
	dev      nvml.Device
	uuid     string
	profile  string
	slices   uint32
	sms      uint32
	memTotal uint64
	gi       int
	giOK     bool // gi was read (dcgm-exporter's GPU_I_ID)
	gpm      *gpmTarget
}

type vgpuDev struct {
	index   int
	inst    nvml.VgpuInstance
	uuid    string
	profile string
	fb      uint64
	vmID    string
}

func (s *Source) describeGPU(g *gpuDev) {
	if u, r := g.dev.GetUUID(); s.ok(g, "nvmlDeviceGetUUID", r) {
		g.uuid = u
		s.m.gpuFound(u)
	}
	if name, r := g.dev.GetName(); s.ok(g, "nvmlDeviceGetName", r) {
		g.model = strings.TrimPrefix(name, "NVIDIA ")
	}
	if m, ok := hardware.Lookup(g.model); ok {
		g.sms = m.SMs
	} else if a, r := g.dev.GetAttributes(); s.ok(g, "nvmlDeviceGetAttributes", r) {
		// A model the catalog does not name (real names read "NVIDIA H100 80GB HBM3"): ask NVML.
		g.sms = a.MultiprocessorCount
	}
	if mem, r := g.dev.GetMemoryInfo(); s.ok(g, "nvmlDeviceGetMemoryInfo", r) {
		g.memTotal = mem.Total
	}
	if pci, r := g.dev.GetPciInfo(); s.ok(g, "nvmlDeviceGetPciInfo", r) {
		g.pciBusID = pciBusID(pci)
	}
	if s.has("nvmlGpmQueryDeviceSupport") {
		if sup, r := g.dev.GpmQueryDeviceSupport(); s.ok(g, "nvmlGpmQueryDeviceSupport", r) {
			g.gpm = sup.IsSupportedDevice != 0
		}
	}
	g.gpmMIG = g.gpm && s.has("nvmlGpmMigSampleGet")
	g.memV2 = s.has("nvmlDeviceGetMemoryInfo_v2")
	g.schedOK = s.has("nvmlDeviceGetVgpuSchedulerLog_v2")
	s.registerEvents(g)
	s.logger.Info("GPU found", "gpu", g.index, "uuid", g.uuid, "model", g.model, "pci_bus_id", g.pciBusID, "gpm", g.gpm,
		"vgpu_scheduler_log", g.schedOK)
}

// discover lists each GPU's MIG instances and active vGPUs.
func (s *Source) discover(now time.Time) {
	s.lastDiscover = now
	for _, g := range s.gpus {
		if g.dev == nil {
			continue
		}
		s.discoverMIG(g, now)
		s.discoverVGPU(g)
	}
}

func (s *Source) discoverMIG(g *gpuDev, now time.Time) {
	g.mig = false
	if !g.can("nvmlDeviceGetMigMode") {
		return
	}
	cur, _, r := g.dev.GetMigMode()
	if !s.ok(g, "nvmlDeviceGetMigMode", r) || cur != nvml.DEVICE_MIG_ENABLE {
		return
	}
	g.mig = true
	maxCount, r := g.dev.GetMaxMigDeviceCount()
	if !s.ok(g, "nvmlDeviceGetMaxMigDeviceCount", r) {
		return
	}
	maxCount = min(max(maxCount, 0), maxMIGDevices)
	old := map[string]*migDev{}
	for _, m := range g.migs {
		old[m.uuid] = m
	}
	var migs []*migDev
	for i := 0; i < maxCount; i++ {
		md, r := g.dev.GetMigDeviceHandleByIndex(i)
		if r == nvml.ERROR_NOT_FOUND {
			s.count("nvmlDeviceGetMigDeviceHandleByIndex")
			continue // an empty slot of the layout
		}
		if !s.ok(g, "nvmlDeviceGetMigDeviceHandleByIndex", r) {
			continue
		}
		m := &migDev{index: len(migs), dev: md}
		if u, r := md.GetUUID(); s.ok(g, "nvmlDeviceGetUUID", r) {
			m.uuid = u
		}
		if prev, ok := old[m.uuid]; ok && prev.index == m.index {
			migs = append(migs, prev)
			continue
		}
		if name, r := md.GetName(); s.ok(g, "nvmlDeviceGetName", r) {
			m.profile = migProfile(name)
		}
		if a, r := md.GetAttributes(); s.ok(g, "nvmlDeviceGetAttributes", r) {
			m.sms, m.slices = a.MultiprocessorCount, a.GpuInstanceSliceCount
		}
		if mem, r := md.GetMemoryInfo(); s.ok(g, "nvmlDeviceGetMemoryInfo", r) {
			m.memTotal = mem.Total
		}
		if gi, r := md.GetGpuInstanceId(); s.ok(g, "nvmlDeviceGetGpuInstanceId", r) {
			m.gi, m.giOK = gi, true
		}
		if g.gpmMIG {
			m.gpm = s.newGPM(g)
			s.sampleGPM(g, m.gpm, m.gi, now)
		}
		migs = append(migs, m)
	}
	g.migs = migs
}

// migProfile takes the profile from a MIG device name ("NVIDIA A100-SXM4-40GB MIG 1g.5gb").
func migProfile(name string) string {
	if i := strings.LastIndex(name, "MIG "); i >= 0 {
		return strings.TrimSpace(name[i+len("MIG "):])
	}
	return name
}

func (s *Source) discoverVGPU(g *gpuDev) {
	if g.mig || !g.can("nvmlDeviceGetActiveVgpus") {
		return
	}
	insts, r := g.dev.GetActiveVgpus()
	if !s.ok(g, "nvmlDeviceGetActiveVgpus", r) {
		g.vgpus = nil
		return
	}
	vgpus := make([]*vgpuDev, 0, len(insts))
	for i, inst := range insts {
		v := &vgpuDev{index: i, inst: inst}
		if u, r := inst.GetUUID(); s.ok(g, "nvmlVgpuInstanceGetUUID", r) {
			v.uuid = u
		}
		if typ, r := inst.GetType(); s.ok(g, "nvmlVgpuInstanceGetType", r) {
			if name, r := typ.GetName(); s.ok(g, "nvmlVgpuTypeGetName", r) {
				v.profile = strings.TrimPrefix(name, "NVIDIA ")
			}
			if fb, r := typ.GetFramebufferSize(); s.ok(g, "nvmlVgpuTypeGetFramebufferSize", r) {
				v.fb = fb
			}
		}
		if vm, _, r := inst.GetVmID(); s.ok(g, "nvmlVgpuInstanceGetVmID", r) {
			v.vmID = vm
		}
		vgpus = append(vgpus, v)
	}
	g.vgpus = vgpus
}
