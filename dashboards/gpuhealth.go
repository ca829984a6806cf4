package dashboards

//lint:file-ignore SA1019 the v1 dashboard schema imports into Grafana 11 and 12; dashboardv2 only into 12.

import "github.com/grafana/grafana-foundation-sdk/go/dashboard"

// GPUHealthUID is the GPU-health dashboard's uid. Its queries read health fields that only some
// sources report, so e2e's TestDCGMCompat runs them against an exporter that reports them all.
const GPUHealthUID = "slicemeter-gpu-health"

// gpuHealth is the operator's view of the devices, on the exporter's Prometheus metrics alone:
// what dcgm-exporter's users watch, per GPU and per MIG / vGPU instance.
func gpuHealth() *dashboard.DashboardBuilder {
	const perGPU = "{{node}} gpu{{gpu}}"
	return newDashboard(GPUHealthUID, "slicemeter / GPU health",
		"Utilization, memory, power, temperature, throttling and errors of every GPU and instance, from the exporters' /metrics.", prometheusOnly, "gpu-health").
		WithRow(dashboard.NewRowBuilder("Status")).
		WithPanel(promStat("GPUs reporting", "short", promQuery{`sum(slicemeter_gpu_up)`, "up"})).
		WithPanel(promStat("GPUs failed (fallen off the bus, NVML errors)", "short", promQuery{`count(slicemeter_gpu_up == 0) or vector(0)`, "failed"})).
		WithPanel(promStat("Row remaps pending a reset", "short", promQuery{`sum(slicemeter_gpu_row_remap_pending)`, "pending"})).
		WithPanel(promStat("Row remap failures", "short", promQuery{`sum(slicemeter_gpu_row_remap_failure)`, "failed"})).
		WithRow(dashboard.NewRowBuilder("Utilization")).
		WithPanel(promSeries("GPU utilization", "percentunit", promQuery{`max by (node, gpu) (slicemeter_gpu_utilization_ratio)`, perGPU})).
		WithPanel(promSeries("Copy, encoder and decoder utilization", "percentunit",
			promQuery{`max by (node, gpu) (slicemeter_gpu_copy_utilization_ratio)`, "copy " + perGPU},
			promQuery{`max by (node, gpu) (slicemeter_gpu_encoder_utilization_ratio)`, "encoder " + perGPU},
			promQuery{`max by (node, gpu) (slicemeter_gpu_decoder_utilization_ratio)`, "decoder " + perGPU})).
		WithPanel(promSeries("SM activity by instance (whole GPU, MIG, vGPU)", "percentunit",
			promQuery{`max by (node, slice, kind, profile) (slicemeter_instance_sm_active_ratio)`, "{{node}} {{slice}} {{kind}} {{profile}}"})).
		WithPanel(promSeries("Tensor and DRAM activity by instance", "percentunit",
			promQuery{`max by (node, slice) (slicemeter_instance_tensor_active_ratio)`, "tensor {{node}} {{slice}}"},
			promQuery{`max by (node, slice) (slicemeter_instance_dram_bandwidth_ratio)`, "dram {{node}} {{slice}}"})).
		WithRow(dashboard.NewRowBuilder("Memory")).
		WithPanel(promSeries("Framebuffer used, free and reserved", "bytes",
			promQuery{`max by (node, gpu) (slicemeter_gpu_memory_used_bytes)`, "used " + perGPU},
			promQuery{`max by (node, gpu) (slicemeter_gpu_memory_free_bytes)`, "free " + perGPU},
			promQuery{`max by (node, gpu) (slicemeter_gpu_memory_reserved_bytes)`, "reserved " + perGPU})).
		WithPanel(promSeries("Memory used by instance", "bytes",
			promQuery{`max by (node, slice, kind) (slicemeter_instance_memory_used_bytes)`, "{{node}} {{slice}} {{kind}}"})).
		WithRow(dashboard.NewRowBuilder("Power and temperature")).
		WithPanel(promSeries("Power draw", "watt", promQuery{`max by (node, gpu) (slicemeter_gpu_power_watts)`, perGPU})).
		WithPanel(promSeries("GPU and memory temperature", "celsius",
			promQuery{`max by (node, gpu) (slicemeter_gpu_temperature_celsius)`, "gpu " + perGPU},
			promQuery{`max by (node, gpu) (slicemeter_gpu_memory_temperature_celsius)`, "memory " + perGPU})).
		WithPanel(promSeries("Clocks", "hertz",
			promQuery{`max by (node, gpu) (slicemeter_gpu_sm_clock_hertz)`, "sm " + perGPU},
			promQuery{`max by (node, gpu) (slicemeter_gpu_memory_clock_hertz)`, "memory " + perGPU})).
		WithRow(dashboard.NewRowBuilder("Throttling")).
		WithPanel(promSeries("GPUs whose clocks are held down, by reason", "short",
			promQuery{`sum by (reason) (slicemeter_gpu_clocks_event_reason)`, "{{reason}}"})).
		WithPanel(promSeries("Share of time held down by the power cap or temperature", "percentunit",
			promQuery{`max by (node, gpu, cause) (rate(slicemeter_gpu_violation_seconds_total[5m]))`, "{{cause}} " + perGPU})).
		WithRow(dashboard.NewRowBuilder("Errors")).
		WithPanel(promSeries("XID errors (last hour)", "short",
			promQuery{`sum by (node, gpu) (increase(slicemeter_gpu_xid_errors_total[1h]))`, perGPU})).
		WithPanel(promSeries("ECC errors (last hour)", "short",
			promQuery{`sum by (node, gpu, type) (increase(slicemeter_gpu_ecc_errors_total[1h]))`, "{{type}} " + perGPU})).
		WithPanel(promSeries("Remapped rows", "short",
			promQuery{`max by (node, gpu, cause) (slicemeter_gpu_remapped_rows_total)`, "{{cause}} " + perGPU})).
		WithPanel(promSeries("PCIe replays per second", "short",
			promQuery{`max by (node, gpu) (rate(slicemeter_gpu_pcie_replays_total[5m]))`, perGPU})).
		WithRow(dashboard.NewRowBuilder("Interconnect and driver")).
		WithPanel(promSeries("PCIe throughput", "Bps",
			promQuery{`max by (node, gpu, direction) (rate(slicemeter_gpu_pcie_bytes_total[5m]))`, "{{direction}} " + perGPU})).
		WithPanel(promSeries("NVLink throughput", "Bps",
			promQuery{`max by (node, gpu, direction) (rate(slicemeter_gpu_nvlink_bytes_total[5m]))`, "{{direction}} " + perGPU})).
		WithPanel(promTable("Driver and CUDA versions",
			promQuery{`count by (node, driver_version, cuda_version) (slicemeter_gpu_driver_info)`, "{{node}}"}))
}
