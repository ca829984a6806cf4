// Package exporter is the per-node sampling side of slicemeter: a Source (real NVML, the
// simulator or a replayed capture) is read on every tick of a Clock, and each tick's samples go
// to the Sinks (the Prometheus collector, the Kafka publisher). Package service assembles them.
package exporter

import (
	"context"
	"time"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Source reads every instance it sees at one tick.
type Source interface {
	// Read returns the samples of tick t (covering [t, t+interval)), grouped by node. A node
	// whose exporter is down returns nothing.
	Read(ctx context.Context, t time.Time, interval time.Duration) ([]NodeSamples, error)
}

// NodeSamples are one node's samples of one tick.
type NodeSamples struct {
	Node    string
	Samples []*pb.Sample
	GPUs    []GPUState // optional: sources that read real devices (or their simulation) fill it
}

// Sink receives every tick's samples. Flush is called at the flush interval and at the end.
type Sink interface {
	Write(ctx context.Context, tick time.Time, samples []NodeSamples) error
	Flush(ctx context.Context) error
}

// GPUState is what a source knows about one physical GPU at one tick beyond its instances'
// samples: device health and counters that Prometheus serves but the Kafka stream does not carry.
type GPUState struct {
	Index uint32
	UUID  string
	Model string
	// PCIBusID is the GPU's PCI address as dcgm-exporter's pci_bus_id shows it
	// ("00000000:3B:00.0"), read once at discovery; empty where NVML did not report it.
	PCIBusID string
	// Failed says the GPU could not be read this tick (fallen off the bus, NVML errors); its
	// instances are missing from the tick, the other GPUs are not.
	Failed      bool
	FailReason  string
	Utilization float64 // 0..1, mean of the driver's buffered utilization samples of the tick
	UtilSamples int     // driver samples read this tick (GetSamples)
	MemUsed     uint64
	MemTotal    uint64
	PowerWatts  float64
	EnergyJ     float64 // total energy counter since the driver loaded
	SMClockHz   float64
	MemClockHz  float64
	TempC       float64
	// ThrottleReasons is NVML's clocks-event reason bit mask.
	ThrottleReasons uint64
	ECCUncorrected  uint64 // volatile uncorrected ECC errors
	ECCCorrected    uint64
	XIDs            uint64 // XID events seen since the exporter started
	LastXID         uint64
	// ActivityAvailable is false where per-instance activity cannot be measured (MIG without
	// GPM, i.e. before Hopper): those instances' sm_active is not served rather than served as 0.
	ActivityAvailable bool
	Instances         []InstanceActivity
	// Health is what dcgm-exporter's users alert on, read at the tick like everything else.
	Health Health
}

// Health holds a GPU's health counters and gauges beyond the basics above, read at the tick
// (mostly through nvmlDeviceGetFieldValues). A device reports only some of them (no NVLink on
// PCIe cards, no row remapping before Ampere): Supported says which, and an unsupported one is
// not served rather than served as 0.
type Health struct {
	Supported HealthFields

	PCIeTxBytes, PCIeRxBytes uint64 // counters since the driver loaded
	PCIeReplays              uint64 // counter
	// NVLinkTxBytes and NVLinkRxBytes are summed over the GPU's links, counters.
	NVLinkTxBytes, NVLinkRxBytes uint64
	MemTempC                     float64 // HBM temperature
	FBFree, FBReserved           uint64  // bytes; used is GPUState.MemUsed
	// CopyUtil (memory controller), EncoderUtil and DecoderUtil are 0..1 over the tick.
	CopyUtil, EncoderUtil, DecoderUtil float64
	// Row remapping (Ampere+): rows remapped for correctable and uncorrectable errors
	// (counters), a remap waiting for a GPU reset, and a remap that failed.
	RemappedCorrectable, RemappedUncorrectable uint64
	RemapPending, RemapFailure                 bool
	// PowerViolationNs and ThermalViolationNs are the time the clocks were held down by the
	// power cap and by temperature (nvmlDeviceGetViolationStatus), counters in ns.
	PowerViolationNs, ThermalViolationNs uint64
	// DriverVersion and CUDAVersion (e.g. "580.65.06", "13.0") are the node's, repeated per GPU.
	DriverVersion, CUDAVersion string
}

// HealthFields is a set of Health's fields, one bit each.
type HealthFields uint32

// The fields of Health that a device may or may not report.
const (
	HealthPCIe HealthFields = 1 << iota // PCIeTxBytes, PCIeRxBytes
	HealthPCIeReplays
	HealthNVLink // NVLinkTxBytes, NVLinkRxBytes
	HealthMemTemp
	HealthFB // FBFree (from memory info v2, else v1's total − used)
	HealthCopyUtil
	HealthCodecUtil  // EncoderUtil, DecoderUtil
	HealthRemap      // RemappedCorrectable, RemappedUncorrectable, RemapPending, RemapFailure
	HealthViolations // PowerViolationNs, ThermalViolationNs
	HealthVersions   // DriverVersion, CUDAVersion
	HealthFBReserved // FBReserved: memory info v2 only (v1's used counts it)
)

// Has says whether every field of f is supported.
func (h Health) Has(f HealthFields) bool { return h.Supported&f == f }

// InstanceActivity is an instance's GPM activity beyond sm_active, and its processes.
type InstanceActivity struct {
	InstanceID  string
	SMOccupancy float64 // 0..1
	TensorRatio float64 // 0..1, any tensor pipe active
	DRAMRatio   float64 // 0..1, DRAM bandwidth utilization
	HasGPM      bool
	Processes   int
	VMID        string // vGPU: the VM it is attached to
	// DriverSMUtil is the driver's own SM utilization of a vGPU (GetVgpuUtilization), 0..1.
	DriverSMUtil    float64
	HasDriverSMUtil bool
	VGPUType        string // vGPU: the vGPU type (profile) name
	// GPUInstanceID is a MIG instance's GPU instance id (nvmlGpuInstanceInfo_t.id), what
	// dcgm-exporter labels GPU_I_ID; HasGPUInstanceID is false for whole GPUs and vGPUs.
	GPUInstanceID    uint32
	HasGPUInstanceID bool
}

// Shares says which processes run on which time-sliced or MPS replica of a GPU (instances of
// kind share): on Kubernetes from the device plugin's replicas and the pods' cgroups, in the
// simulator from the scenario. A source without one samples no share instances.
type Shares interface {
	// Share returns how the GPU with this UUID is shared; Replicas 0: it is not.
	Share(uuid string) Share
}

// Share is one GPU's replicas.
type Share struct {
	// Replicas is the number of replicas the GPU is shared as: each is billed 1/Replicas.
	Replicas int
	// IDs are the replicas' instance ids (the device plugin's device ids, GPU-<uuid>::<n>),
	// so that idle ones are sampled too.
	IDs []string
	// Replica maps a process on the GPU to its replica's instance id; ok is false for a
	// process of no known replica (its time is the GPU's, not a tenant's).
	Replica func(pid uint32) (id string, ok bool)
}
