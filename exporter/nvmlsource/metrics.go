package nvmlsource

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the NVML source's self-metrics.
type Metrics struct {
	calls       *prometheus.CounterVec
	callsByName map[string]prometheus.Counter // Calls()' series, looked up once: a tick makes ~400 calls
	errors      *prometheus.CounterVec
	gpuFailures *prometheus.CounterVec
	utilSamples prometheus.Counter
	lateSched   prometheus.Counter
	lostSched   *prometheus.CounterVec
}

// NewMetrics registers the source's metrics with reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_exporter_nvml_calls_total", Help: "NVML calls made, by call.",
		}, []string{"call"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_exporter_nvml_errors_total", Help: "NVML calls that failed (other than not supported), by call.",
		}, []string{"call"}),
		gpuFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_exporter_gpu_read_failures_total", Help: "Ticks in which a GPU could not be read; its instances are missing from those ticks.",
		}, []string{"uuid"}),
		utilSamples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_nvml_utilization_samples_total", Help: "Driver-buffered GPU utilization samples read (GetSamples).",
		}),
		lateSched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_vgpu_scheduler_late_entries_total", Help: "vGPU scheduler log entries read after the tick their run started in was reported: that run time is missing from it, the wait is counted in the next tick.",
		}),
		lostSched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_exporter_vgpu_schedlog_lost_seconds_total", Help: "GPU time whose vGPU scheduler log entries the driver overwrote before they were read (the 200-entry log wrapped between two reads); the ticks it reaches are marked unmeasured (sm_active_unavailable), never idle.",
		}, []string{"gpu"}),
	}
	// Every call's series exists from the start at 0, so that increase() and the NVML error
	// alert see a call's first failure.
	m.callsByName = map[string]prometheus.Counter{}
	for _, call := range Calls() {
		m.callsByName[call] = m.calls.WithLabelValues(call)
		m.errors.WithLabelValues(call)
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.errors, m.gpuFailures, m.utilSamples, m.lateSched, m.lostSched)
	}
	return m
}

// called counts one call of an NVML function. The label lookup (hashing the value, the vector's
// lock) was a quarter of a tick's CPU; the map is only read after NewMetrics.
func (m *Metrics) called(call string) {
	if c, ok := m.callsByName[call]; ok {
		c.Inc()
		return
	}
	m.calls.WithLabelValues(call).Inc()
}

// gpuFound starts the GPU's read-failure series at 0.
func (m *Metrics) gpuFound(uuid string) {
	m.gpuFailures.WithLabelValues(uuid)
	m.lostSched.WithLabelValues(uuid)
}

// Calls are the NVML calls the source makes and counts (the call label's values);
// TestCallsListsEveryCall keeps the list complete.
func Calls() []string {
	return []string{
		"nvmlDeviceGetActiveVgpus", "nvmlDeviceGetAttributes", "nvmlDeviceGetClockInfo",
		"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetCount", "nvmlDeviceGetCurrentClocksEventReasons",
		"nvmlDeviceGetDecoderUtilization", "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetFieldValues",
		"nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetMaxMigDeviceCount",
		"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetMigMode",
		"nvmlDeviceGetName", "nvmlDeviceGetPciInfo", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetProcessUtilization", "nvmlDeviceGetSamples", "nvmlDeviceGetTemperature",
		"nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetUUID",
		"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetViolationStatus",
		"nvmlDeviceGetVgpuSchedulerLog_v2", "nvmlDeviceGetVgpuUtilization", "nvmlDeviceRegisterEvents",
		"nvmlEventSetCreate", "nvmlEventSetWait", "nvmlGpmMetricsGet", "nvmlGpmMigSampleGet",
		"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet", "nvmlSystemGetCudaDriverVersion",
		"nvmlSystemGetDriverVersion", "nvmlVgpuInstanceGetFbUsage",
		"nvmlVgpuInstanceGetType", "nvmlVgpuInstanceGetUUID", "nvmlVgpuInstanceGetVmDriverVersion",
		"nvmlVgpuInstanceGetVmID", "nvmlVgpuTypeGetFramebufferSize", "nvmlVgpuTypeGetName",
	}
}
