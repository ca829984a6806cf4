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

var dcgmGPULabels = []string{"instance", "gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}

// dcgmPCIBusIDs are the simulated GPUs' PCI addresses (an HGX board's first buses) by gpu, as
// dcgm-exporter writes them: a series with pci_bus_id must carry its own GPU's.
var dcgmPCIBusIDs = map[string]string{"0": "00000000:18:00.0", "1": "00000000:2A:00.0", "2": "00000000:3A:00.0", "3": "00000000:5D:00.0"}

// The dcgm-exporter compatibility rules (alerts/dcgm-compat.rules.yml) in a real Prometheus that
// scrapes the exporter's collector on loopback: dashboard 12239's expressions, every default
// counter the rules publish, and every query of the GPU-health dashboard return series with the
// labels dcgm-exporter's users expect (GPU_I_ID and GPU_I_PROFILE on MIG instances).
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
	reg.MustRegister(col)
	h, err := webserver.MetricsHandler(reg)
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
	}
	var checks []check
	vars := strings.NewReplacer("$instance", strings.ReplaceAll(host, ".", `\\.`)+":.*", "$gpu", "0|1|2|3", "$Hostname", "node-d")
	for _, q := range dcgm12239 {
		perMIG := strings.Contains(q.expr, "TENSOR") || strings.Contains(q.expr, "GPU_I_ID")
		checks = append(checks, check{"12239 / " + q.panel, vars.Replace(q.expr), q.labels, perMIG})
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
		checks = append(checks, check{name, name, dcgmGPULabels, true})
	}
	all, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	n12239, nHealth := len(checks), 0
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
			if problem := checkLabels(series, c.labels, c.perMIG); problem != "" {
				failed = append(failed, c.name+": "+problem+"\n    "+c.expr)
			}
		}
		if len(failed) == 0 {
			t.Logf("all %d dcgm-exporter expressions and all %d GPU-health dashboard queries return series with the expected labels", n12239, nHealth)
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
// labels, one with another GPU's pci_bus_id, or (perMIG) no series with GPU_I_ID and
// GPU_I_PROFILE.
func checkLabels(series []map[string]string, labels []string, perMIG bool) string {
	if len(series) == 0 {
		return "no series"
	}
	for _, s := range series {
		for _, l := range labels {
			if s[l] == "" {
				return fmt.Sprintf("a series without %s: %v", l, s)
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
