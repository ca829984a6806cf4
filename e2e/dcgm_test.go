package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/dashboards"
	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/promcollector"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/internal/webserver"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// dcgmNode has every kind of instance dcgm-exporter's users see: MIG without GPM (A100), MIG
// with it (H100), time-sliced vGPU and a whole GPU, every instance held for the whole hour.
const dcgmNode = `version: 1
name: dcgm-node
start: "2026-01-05T00:00:00Z"
duration: 1h
interval: 500ms
currency: USD
prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}
tiers: {pro: 1.0}
sla: {cold_start: {pro: 30s}}
nodes:
  - name: node-d
    gpus:
      - {model: A100-SXM4-40GB, gpm: false, mig: ["3g.20gb", "3g.20gb"]}
      - {model: H100-SXM5-80GB, mig: ["3g.40gb", "4g.40gb"]}
      - {model: H100-SXM5-80GB, vgpu: {profile: H100-20C, count: 2, scheduler: equal_share, timeslice: 2ms, switch: 20us}}
      - {model: H100-SXM5-80GB}
tenants:
  - name: a
    tier: pro
    allocations:
      - {target: node-d/gpu0/mig0, requested: 0s, ready: 0s, end: 1h, workload: {sm: 0.4, mem: 0.5}}
      - {target: node-d/gpu1/mig1, requested: 0s, ready: 0s, end: 1h, workload: {sm: 0.8, mem: 0.7}}
      - {target: node-d/gpu2/vgpu0, requested: 0s, ready: 0s, end: 1h, workload: {sm: 1.0, mem: 0.3}}
      - {target: node-d/gpu3, requested: 0s, ready: 0s, end: 1h, workload: {sm: 0.6, mem: 0.2}}
`

// healthSource is the simulator with every health field reported (counters growing with the
// ticks) and the GPU instance id of every MIG instance known: what a Hopper node's NVML gives.
type healthSource struct {
	inner exporter.Source
	ticks uint64
}

func (s *healthSource) Read(ctx context.Context, t time.Time, interval time.Duration) ([]exporter.NodeSamples, error) {
	out, err := s.inner.Read(ctx, t, interval)
	s.ticks++
	n := s.ticks
	for i := range out {
		kind := map[string]pb.Kind{}
		for _, smp := range out[i].Samples {
			kind[smp.InstanceId] = smp.Kind
		}
		for g := range out[i].GPUs {
			st := &out[i].GPUs[g]
			st.ThrottleReasons |= 0x4 // sw_power_cap
			st.Health = exporter.Health{
				Supported: exporter.HealthPCIe | exporter.HealthPCIeReplays | exporter.HealthNVLink | exporter.HealthMemTemp |
					exporter.HealthFB | exporter.HealthFBReserved | exporter.HealthCopyUtil | exporter.HealthCodecUtil | exporter.HealthRemap |
					exporter.HealthViolations | exporter.HealthVersions,
				PCIeTxBytes: n << 20, PCIeRxBytes: n << 21, PCIeReplays: n / 10, NVLinkTxBytes: n << 24, NVLinkRxBytes: n << 24,
				MemTempC: 55, FBFree: st.MemTotal - st.MemUsed, FBReserved: 512 << 20, CopyUtil: 0.2, EncoderUtil: 0.05, DecoderUtil: 0.1,
				RemappedCorrectable: 2, RemappedUncorrectable: 0, RemapPending: false, RemapFailure: false,
				PowerViolationNs: n * 1e8, ThermalViolationNs: n * 5e7, DriverVersion: "580.65.06", CUDAVersion: "13.0",
			}
			for a := range st.Instances {
				in := &st.Instances[a]
				if kind[in.InstanceID] == pb.Kind_KIND_MIG && !in.HasGPUInstanceID {
					in.GPUInstanceID, in.HasGPUInstanceID = uint32(a+1), true
				}
			}
		}
	}
	return out, err
}

// dcgm12239 are the expressions of Grafana dashboard 12239 (NVIDIA dcgm-exporter's dashboard,
// grafana/dcgm-exporter-dashboard.json in NVIDIA/dcgm-exporter), with its variables $instance and
// $gpu, and the labels each must return: its legends read {{gpu}}, dcgm-exporter's users'
// queries also UUID, pci_bus_id, modelName, Hostname and device.
var dcgm12239 = []struct {
	panel, expr string
	labels      []string
}{
	{"variable instance: label_values(DCGM_FI_DEV_GPU_TEMP, instance)", `group by (instance) (DCGM_FI_DEV_GPU_TEMP)`, []string{"instance"}},
	{"variable gpu: label_values(DCGM_FI_DEV_GPU_TEMP, gpu)", `group by (gpu) (DCGM_FI_DEV_GPU_TEMP)`, []string{"gpu"}},
	{"GPU Temperature", `DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"}`, dcgmGPULabels},
	{"GPU Avg. Temp", `avg(DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"})`, nil},
	{"GPU Power Usage", `DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"}`, dcgmGPULabels},
	{"GPU Power Total", `sum(DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"})`, nil},
	{"GPU SM Clocks", `DCGM_FI_DEV_SM_CLOCK{instance=~"$instance", gpu=~"$gpu"} * 1000000`, dcgmGPULabels},
	{"GPU Utilization", `DCGM_FI_DEV_GPU_UTIL{instance=~"$instance", gpu=~"$gpu"}`, dcgmGPULabels},
	{"GPU Framebuffer Mem Used", `DCGM_FI_DEV_FB_USED{instance=~"$instance", gpu=~"$gpu"}`, dcgmGPULabels},
	{"Tensor Core Utilization", `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{instance=~"$instance", gpu=~"$gpu"}`, dcgmGPULabels},
	// The current revision (grafana/dcgm-exporter-dashboard.json today): variables $Hostname and
	// $gpu listed from FB_FREE, panels aggregated by Hostname and, for MIG, GPU_I_ID/GPU_I_PROFILE.
	{"now / variable Hostname: label_values(DCGM_FI_DEV_FB_FREE, Hostname)", `group by (Hostname) (DCGM_FI_DEV_FB_FREE)`, []string{"Hostname"}},
	{"now / variable gpu: label_values(DCGM_FI_DEV_FB_FREE{Hostname=~\"$Hostname\"}, gpu)", `group by (gpu) (DCGM_FI_DEV_FB_FREE{Hostname=~"$Hostname"})`, []string{"gpu"}},
	{"now / GPU Temperature", `max(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)`, []string{"Hostname", "gpu"}},
	{"now / GPU Avg. Temp", `avg(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"})`, nil},
	{"now / GPU Power Usage", `max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)`, []string{"Hostname", "gpu"}},
	{"now / GPU Power Total", `sum(max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (gpu))`, nil},
	{"now / GPU SM Clocks", `max(DCGM_FI_DEV_SM_CLOCK{Hostname=~"$Hostname", gpu=~"$gpu"} * 1000000) by (Hostname, UUID, gpu)`, []string{"Hostname", "UUID", "gpu"}},
	{"now / GPU Utilization (MIG)", `max(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)`, []string{"Hostname", "gpu"}},
	{"now / Tensor Core Utilization (MIG)", `max(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)`, []string{"Hostname", "gpu"}},
	{"now / GPU Framebuffer Mem Used (MIG)", `max(DCGM_FI_DEV_FB_USED{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)`, []string{"Hostname", "gpu"}},
}

// dcgmGPULabels are the labels of dcgm-exporter's names up to 4.8: Hostname up to 4.8.2,
// hostname from 4.8.3 (NVIDIA/dcgm-exporter#655), DCGM_FI_DRIVER_VERSION.
var dcgmGPULabels = []string{"instance", "gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "hostname", "DCGM_FI_DRIVER_VERSION"}

// dcgm410GPULabels are the labels dcgm-exporter 4.9 and 4.10 put on every series: hostname and,
// since 4.9.0, the driver version as DCGM_FI_SYSTEM_DRIVER_VERSION; dcgm410Absent the spellings
// they no longer write.
var (
	dcgm410GPULabels = []string{"instance", "gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "DCGM_FI_SYSTEM_DRIVER_VERSION"}
	dcgm410Absent    = []string{"Hostname", "DCGM_FI_DRIVER_VERSION"}
)

// dcgm410Dashboard are the panels of dcgm-exporter's own dashboard (grafana/dcgm-exporter-dashboard.json,
// the revision of NVIDIA/dcgm-exporter d5e5f51, the newest stored) with the names dcgm-exporter
// 4.9.0 and 4.10.0 renamed its fields to, in their units (the SM clock in Hz needs no * 1000000),
// and its legends by hostname (4.10.0: "GPU {{gpu}} on {{hostname}}"). The revision 4.10 ships is
// not in the stored snapshot: these are its panels as the renames make them.
var dcgm410Dashboard = []struct {
	panel, expr string
	labels      []string
}{
	{"variable instance", `group by (instance) (DCGM_FI_DEV_GPU_TEMP_CELSIUS)`, []string{"instance"}},
	{"variable gpu", `group by (gpu) (DCGM_FI_DEV_GPU_TEMP_CELSIUS)`, []string{"gpu"}},
	{"GPU Temperature", `DCGM_FI_DEV_GPU_TEMP_CELSIUS{instance=~"$instance", gpu=~"$gpu"}`, dcgm410GPULabels},
	{"GPU Avg. Temp", `avg(DCGM_FI_DEV_GPU_TEMP_CELSIUS{instance=~"$instance", gpu=~"$gpu"})`, nil},
	{"GPU Power Usage", `DCGM_FI_DEV_BOARD_POWER_WATTS{instance=~"$instance", gpu=~"$gpu"}`, dcgm410GPULabels},
	{"GPU Power Total", `sum(DCGM_FI_DEV_BOARD_POWER_WATTS{instance=~"$instance", gpu=~"$gpu"})`, nil},
	{"GPU SM Clocks", `DCGM_FI_DEV_SM_CLOCK_HERTZ{instance=~"$instance", gpu=~"$gpu"}`, dcgm410GPULabels},
	{"GPU Utilization", `DCGM_FI_DEV_GPU_UTIL_RATIO{instance=~"$instance", gpu=~"$gpu"}`, dcgm410GPULabels},
	{"GPU Framebuffer Mem Used", `DCGM_FI_DEV_FB_USED_BYTES{instance=~"$instance", gpu=~"$gpu"}`, []string{"instance", "gpu", "UUID", "device", "modelName", "hostname"}},
	{"Tensor Core Utilization", `DCGM_FI_PROF_TENSOR_UTIL_RATIO{instance=~"$instance", gpu=~"$gpu"}`, []string{"instance", "gpu", "UUID", "device", "modelName", "hostname"}},
}

// dcgm410Units are queries that return series only where a 4.9/4.10 name is in the old unit:
// utilization as % rather than 0-1, memory in MiB rather than bytes, clocks in MHz rather than
// Hz (the simulated GPUs have at least 40 GiB and clocks above 100 MHz).
var dcgm410Units = []string{
	`DCGM_FI_DEV_GPU_UTIL_RATIO > 1`,
	`DCGM_FI_DEV_MEMORY_UTIL_RATIO > 1`,
	`DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO > 1`,
	`DCGM_FI_DEV_FB_CAPACITY_BYTES < 2^30`,
	`(DCGM_FI_DEV_FB_USED_BYTES + DCGM_FI_DEV_FB_FREE_BYTES) < 2^30`,
	`DCGM_FI_DEV_SM_CLOCK_HERTZ < 1e8`,
	`DCGM_FI_DEV_MEMORY_CLOCK_HERTZ < 1e8`,
}

// dcgmPCIBusIDs are the simulated GPUs' PCI addresses (an HGX board's first buses) by gpu, as
// dcgm-exporter writes them: a series with pci_bus_id must carry its own GPU's.
var dcgmPCIBusIDs = map[string]string{"0": "00000000:18:00.0", "1": "00000000:2A:00.0", "2": "00000000:3A:00.0", "3": "00000000:5D:00.0"}

// The dcgm-exporter compatibility rules (alerts/dcgm-compat.rules.yml) in a real Prometheus that
// scrapes the exporter's collector on loopback: dashboard 12239's expressions, every default
// counter the rules publish, and every query of the GPU-health dashboard return series with the
// labels dcgm-exporter's users expect (GPU_I_ID and GPU_I_PROFILE on MIG instances); so do
// dcgm-exporter's dashboard and every name as 4.9.0 and 4.10.0 renamed them, with 4.10's labels
// and units, beside the old ones.
func TestDCGMCompat(t *testing.T) {
	t.Parallel()
	localtest.SkipShort(t, "Prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc, err := scenario.Parse("dcgm-node", []byte(dcgmNode))
	if err != nil {
		t.Fatal(err)
	}
	sc.Start = time.Now().UTC().Truncate(time.Second)
	src, err := sim.New(sc, "", sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	col := promcollector.New(promcollector.Options{})
	reg := prometheus.NewRegistry()
	h, err := webserver.MetricsHandler(reg, col)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	loop := &exporter.Loop{Source: &healthSource{inner: src}, Clock: exporter.RealClock{}, Sinks: []exporter.Sink{col},
		Start: sc.Start, End: sc.End(), Interval: sc.Interval}
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan error, 1)
	go func() { _, err := loop.Run(loopCtx); loopDone <- err }()
	defer func() {
		stopLoop()
		if err := <-loopDone; err != nil && loopCtx.Err() == nil {
			t.Errorf("sampling loop: %v", err)
		}
	}()
	addr := strings.TrimPrefix(srv.URL, "http://")
	prom, err := local.StartPrometheus(ctx, local.PrometheusOptions{
		Targets:   map[string][]string{"slicemeter-exporter": {addr}},
		RuleFiles: []string{"../alerts/dcgm-compat.rules.yml"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Close()

	host, _, _ := net.SplitHostPort(addr)
	type check struct {
		name, expr string
		labels     []string
		// perMIG: some series must carry GPU_I_ID and GPU_I_PROFILE.
		perMIG bool
		// absent: labels no series may carry; empty: the query must return no series.
		absent []string
		empty  bool
	}
	var checks []check
	vars := strings.NewReplacer("$instance", strings.ReplaceAll(host, ".", `\\.`)+":.*", "$gpu", "0|1|2|3", "$Hostname", "node-d")
	for _, q := range dcgm12239 {
		perMIG := strings.Contains(q.expr, "TENSOR") || strings.Contains(q.expr, "GPU_I_ID")
		checks = append(checks, check{name: "12239 / " + q.panel, expr: vars.Replace(q.expr), labels: q.labels, perMIG: perMIG})
	}
	// Every name the rules publish (the default counters and more) returns series.
	for _, name := range []string{"DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
		"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
		"DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
		"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION",
		"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
		"DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"} {
		checks = append(checks, check{name: name, expr: name, labels: dcgmGPULabels})
	}
	for _, name := range []string{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_DRAM_ACTIVE"} {
		checks = append(checks, check{name: name, expr: name, labels: dcgmGPULabels, perMIG: true})
	}
	n12239Only := len(checks)
	// dcgm-exporter 4.9 and 4.10: its dashboard's panels with the new names, every new name
	// with 4.10's labels only, and each in its new unit.
	for _, q := range dcgm410Dashboard {
		perMIG := strings.Contains(q.expr, "TENSOR")
		checks = append(checks, check{name: "4.10 dashboard / " + q.panel, expr: vars.Replace(q.expr), labels: q.labels, perMIG: perMIG, absent: dcgm410Absent})
	}
	for _, name := range []string{"DCGM_FI_DEV_MEMORY_UTIL_RATIO", "DCGM_FI_DEV_ENC_UTIL_RATIO", "DCGM_FI_DEV_DEC_UTIL_RATIO",
		"DCGM_FI_DEV_FB_FREE_BYTES", "DCGM_FI_DEV_FB_RESERVED_BYTES", "DCGM_FI_DEV_FB_CAPACITY_BYTES", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS",
		"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
		"DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND",
		"DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND", "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND", "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND",
		"DCGM_FI_DEV_XID_ERROR", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
		"DCGM_FI_DEV_ROW_REMAP_FAILED", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"} {
		checks = append(checks, check{name: "4.10 / " + name, expr: name, labels: dcgm410GPULabels, absent: dcgm410Absent})
	}
	for _, name := range []string{"DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "DCGM_FI_PROF_SM_UTIL_RATIO", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO", "DCGM_FI_PROF_DRAM_UTIL_RATIO"} {
		checks = append(checks, check{name: "4.10 / " + name, expr: name, labels: []string{"instance", "gpu", "UUID", "device", "modelName", "hostname"}, perMIG: true, absent: dcgm410Absent})
	}
	// A name both generations share is one series per GPU, with both generations' labels.
	for _, name := range []string{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ROW_REMAP_PENDING"} {
		checks = append(checks, check{name: "both / " + name, expr: name, labels: append(append([]string{}, dcgmGPULabels...), "DCGM_FI_SYSTEM_DRIVER_VERSION")})
		checks = append(checks, check{name: "both / one series per GPU: " + name, expr: "count by (instance, gpu) (" + name + ") > 1", empty: true})
	}
	for _, expr := range dcgm410Units {
		checks = append(checks, check{name: "4.10 unit / " + expr, expr: expr, empty: true})
	}
	n410 := len(checks) - n12239Only

	all, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	n12239, nHealth := n12239Only, 0
	for _, g := range all {
		if g.Dashboard.Uid == nil || *g.Dashboard.Uid != dashboards.GPUHealthUID {
			continue
		}
		for _, q := range dashboards.Queries(g.Dashboard) {
			if q.Kind == "prometheus" {
				checks = append(checks, check{name: q.Dashboard + " / " + q.Panel, expr: q.Text})
				nHealth++
			}
		}
	}
	if nHealth == 0 {
		t.Fatalf("no PromQL query in dashboard %s", dashboards.GPUHealthUID)
	}

	// A few scrapes and rule evaluations (1 s each) make every series, rates included.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var failed []string
		for _, c := range checks {
			series, err := promQuery(ctx, prom.URL(), c.expr)
			if err != nil {
				t.Fatalf("%s: %v\n%s", c.name, err, c.expr)
			}
			if c.empty {
				if len(series) > 0 {
					failed = append(failed, fmt.Sprintf("%s: %d series, want none: %v\n    %s", c.name, len(series), series[0], c.expr))
				}
				continue
			}
			if problem := checkLabels(series, c.labels, c.perMIG, c.absent); problem != "" {
				failed = append(failed, c.name+": "+problem+"\n    "+c.expr)
			}
		}
		if len(failed) == 0 {
			t.Logf("all %d expressions on dcgm-exporter's names up to 4.8, all %d on 4.9/4.10's names and units and all %d GPU-health dashboard queries return what they should", n12239, n410, nHealth)
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(failed)
			t.Fatalf("%d of %d queries fail:\n  %s", len(failed), len(checks), strings.Join(failed, "\n  "))
		}
		time.Sleep(2 * time.Second)
	}
}

// checkLabels says what is wrong with a query's series: none, a series without one of the
// labels or with one of the absent ones, one with another GPU's pci_bus_id, or (perMIG) no
// series with GPU_I_ID and GPU_I_PROFILE.
func checkLabels(series []map[string]string, labels []string, perMIG bool, absent []string) string {
	if len(series) == 0 {
		return "no series"
	}
	for _, s := range series {
		for _, l := range labels {
			if s[l] == "" {
				return fmt.Sprintf("a series without %s: %v", l, s)
			}
		}
		for _, l := range absent {
			if s[l] != "" {
				return fmt.Sprintf("a series with %s: %v", l, s)
			}
		}
		if id, ok := s["pci_bus_id"]; ok && s["gpu"] != "" && id != dcgmPCIBusIDs[s["gpu"]] {
			return fmt.Sprintf("pci_bus_id %q on gpu %s, want %q: %v", id, s["gpu"], dcgmPCIBusIDs[s["gpu"]], s)
		}
	}
	if perMIG {
		for _, s := range series {
			if s["GPU_I_ID"] != "" && s["GPU_I_PROFILE"] != "" {
				return ""
			}
		}
		return fmt.Sprintf("no series with GPU_I_ID and GPU_I_PROFILE among %v", series)
	}
	return ""
}

// promQuery runs an instant query and returns each series' labels.
func promQuery(ctx context.Context, base, expr string) ([]map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decoding Prometheus's answer: %w", err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s", body.Error)
	}
	out := make([]map[string]string, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		out = append(out, r.Metric)
	}
	return out, nil
}
