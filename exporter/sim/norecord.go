package sim

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// go-nvml's mocks record the arguments of every call, for assertions in tests. A simulated
// exporter calls NVML hundreds of times a tick for hours (a vGPU scheduler log alone is ~4 KB
// per call), so the recorded calls grew by ~0.5 GB per simulated hour of the demo fleet. These
// wrappers send the calls the nvml source makes straight to the wired funcs; anything else still
// goes through the mock (and panics there if it is not wired, as before).

type library struct{ *mock.Interface }

func (l library) Init() nvml.Return                             { return l.InitFunc() }
func (l library) Shutdown() nvml.Return                         { return l.ShutdownFunc() }
func (l library) DeviceGetCount() (int, nvml.Return)            { return l.DeviceGetCountFunc() }
func (l library) Extensions() nvml.ExtendedInterface            { return l.ExtensionsFunc() }
func (l library) EventSetCreate() (nvml.EventSet, nvml.Return)  { return l.EventSetCreateFunc() }
func (l library) GpmSampleAlloc() (nvml.GpmSample, nvml.Return) { return l.GpmSampleAllocFunc() }
func (l library) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	return l.DeviceGetHandleByIndexFunc(i)
}
func (l library) SystemGetDriverVersion() (string, nvml.Return) {
	return l.SystemGetDriverVersionFunc()
}
func (l library) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return l.SystemGetCudaDriverVersionFunc()
}
func (l library) GpmMetricsGet(m *nvml.GpmMetricsGetType) nvml.Return {
	return l.GpmMetricsGetFunc(m)
}

type device struct{ *mock.Device }

func (d device) GetUUID() (string, nvml.Return)            { return d.GetUUIDFunc() }
func (d device) GetName() (string, nvml.Return)            { return d.GetNameFunc() }
func (d device) GetMemoryInfo() (nvml.Memory, nvml.Return) { return d.GetMemoryInfoFunc() }
func (d device) GetPciInfo() (nvml.PciInfo, nvml.Return)   { return d.GetPciInfoFunc() }
func (d device) GetPowerUsage() (uint32, nvml.Return)      { return d.GetPowerUsageFunc() }
func (d device) GetTotalEnergyConsumption() (uint64, nvml.Return) {
	return d.GetTotalEnergyConsumptionFunc()
}
func (d device) GetClockInfo(c nvml.ClockType) (uint32, nvml.Return) { return d.GetClockInfoFunc(c) }
func (d device) GetTemperature(s nvml.TemperatureSensors) (uint32, nvml.Return) {
	return d.GetTemperatureFunc(s)
}
func (d device) GetCurrentClocksEventReasons() (uint64, nvml.Return) {
	return d.GetCurrentClocksEventReasonsFunc()
}
func (d device) GetTotalEccErrors(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
	return d.GetTotalEccErrorsFunc(t, c)
}
func (d device) GetSamples(t nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
	return d.GetSamplesFunc(t, last)
}
func (d device) RegisterEvents(types uint64, set nvml.EventSet) nvml.Return {
	return d.RegisterEventsFunc(types, set)
}
func (d device) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	return d.GpmQueryDeviceSupportFunc()
}
func (d device) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.GetComputeRunningProcessesFunc()
}
func (d device) GetMigMode() (int, int, nvml.Return)       { return d.GetMigModeFunc() }
func (d device) GetMaxMigDeviceCount() (int, nvml.Return)  { return d.GetMaxMigDeviceCountFunc() }
func (d device) GpmSampleGet(s nvml.GpmSample) nvml.Return { return d.GpmSampleGetFunc(s) }
func (d device) GpmMigSampleGet(gi int, s nvml.GpmSample) nvml.Return {
	return d.GpmMigSampleGetFunc(gi, s)
}
func (d device) GetMigDeviceHandleByIndex(i int) (nvml.Device, nvml.Return) {
	return d.GetMigDeviceHandleByIndexFunc(i)
}
func (d device) GetActiveVgpus() ([]nvml.VgpuInstance, nvml.Return) { return d.GetActiveVgpusFunc() }
func (d device) GetVgpuSchedulerLog_v2(in nvml.VgpuSchedulerLogInfo_v2) (nvml.VgpuSchedulerLogInfo_v2, nvml.Return) {
	return d.GetVgpuSchedulerLog_v2Func(in)
}
func (d device) GetVgpuUtilization(last uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
	return d.GetVgpuUtilizationFunc(last)
}
func (d device) GetAttributes() (nvml.DeviceAttributes, nvml.Return) { return d.GetAttributesFunc() }
func (d device) GetGpuInstanceId() (int, nvml.Return)                { return d.GetGpuInstanceIdFunc() }

func (d device) GetFieldValues(v []nvml.FieldValue) nvml.Return  { return d.GetFieldValuesFunc(v) }
func (d device) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) { return d.GetMemoryInfo_v2Func() }
func (d device) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return d.GetUtilizationRatesFunc()
}
func (d device) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	return d.GetEncoderUtilizationFunc()
}
func (d device) GetDecoderUtilization() (uint32, uint32, nvml.Return) {
	return d.GetDecoderUtilizationFunc()
}
func (d device) GetViolationStatus(p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
	return d.GetViolationStatusFunc(p)
}

func (v simVgpu) GetUUID() (string, nvml.Return)            { return v.GetUUIDFunc() }
func (v simVgpu) GetType() (nvml.VgpuTypeId, nvml.Return)   { return v.GetTypeFunc() }
func (v simVgpu) GetFbUsage() (uint64, nvml.Return)         { return v.GetFbUsageFunc() }
func (v simVgpu) GetVmDriverVersion() (string, nvml.Return) { return v.GetVmDriverVersionFunc() }
func (v simVgpu) GetVmID() (string, nvml.VgpuVmIdType, nvml.Return) {
	return v.GetVmIDFunc()
}

type vgpuType struct{ *mock.VgpuTypeId }

func (t vgpuType) GetName() (string, nvml.Return)            { return t.GetNameFunc() }
func (t vgpuType) GetFramebufferSize() (uint64, nvml.Return) { return t.GetFramebufferSizeFunc() }

type eventSet struct{ *mock.EventSet }

func (e eventSet) Wait(timeoutMs uint32) (nvml.EventData, nvml.Return) { return e.WaitFunc(timeoutMs) }
func (e eventSet) Free() nvml.Return                                   { return e.FreeFunc() }
