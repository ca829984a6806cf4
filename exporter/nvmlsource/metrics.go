package nvmlsource

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the NVML source's self-metrics.
type Metrics struct {
	calls       *prometheus.CounterVec
	errors      *prometheus.CounterVec
	gpuFailures *prometheus.CounterVec
	utilSamples prometheus.Counter
	lateSched   prometheus.Counter
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
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.errors, m.gpuFailures, m.utilSamples, m.lateSched)
	}
	return m
}
