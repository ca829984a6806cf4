package promcollector

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// allHealth is a GPU's health with every field reported.
func allHealth() exporter.Health {
	return exporter.Health{
		Supported:   exporter.HealthPCIe | exporter.HealthPCIeReplays | exporter.HealthNVLink | exporter.HealthMemTemp | exporter.HealthFB | exporter.HealthFBReserved | exporter.HealthCopyUtil | exporter.HealthCodecUtil | exporter.HealthRemap | exporter.HealthViolations | exporter.HealthVersions,
		PCIeTxBytes: 100, PCIeRxBytes: 200, PCIeReplays: 3, NVLinkTxBytes: 400, NVLinkRxBytes: 500,
		MemTempC: 61, FBFree: 1 << 30, FBReserved: 1 << 20, CopyUtil: 0.25, EncoderUtil: 0.5, DecoderUtil: 0.75,
		RemappedCorrectable: 7, RemappedUncorrectable: 8, RemapPending: true, RemapFailure: false,
		PowerViolationNs: 1.5e9, ThermalViolationNs: 2.5e9, DriverVersion: "580.65.06", CUDAVersion: "13.0",
	}
}

// Every health field a GPU reports is served under its name, and one it does not report is
// not served at all (not as 0); throttle reasons are one 0/1 series per reason.
func TestHealthServed(t *testing.T) {
	const gp = `gpu="0",model="H100-SXM5-80GB",node="n"`
	const u = `uuid="GPU-0"`
	all := []string{
		`slicemeter_gpu_pcie_bytes_total{direction="tx",` + gp + `,` + u + `} 100`,
		`slicemeter_gpu_pcie_bytes_total{direction="rx",` + gp + `,` + u + `} 200`,
		`slicemeter_gpu_pcie_replays_total{` + gp + `,` + u + `} 3`,
		`slicemeter_gpu_nvlink_bytes_total{direction="tx",` + gp + `,` + u + `} 400`,
		`slicemeter_gpu_nvlink_bytes_total{direction="rx",` + gp + `,` + u + `} 500`,
		`slicemeter_gpu_memory_temperature_celsius{` + gp + `,` + u + `} 61`,
		`slicemeter_gpu_memory_free_bytes{` + gp + `,` + u + `} 1.073741824e+09`,
		`slicemeter_gpu_memory_reserved_bytes{` + gp + `,` + u + `} 1.048576e+06`,
		`slicemeter_gpu_copy_utilization_ratio{` + gp + `,` + u + `} 0.25`,
		`slicemeter_gpu_encoder_utilization_ratio{` + gp + `,` + u + `} 0.5`,
		`slicemeter_gpu_decoder_utilization_ratio{` + gp + `,` + u + `} 0.75`,
		`slicemeter_gpu_remapped_rows_total{cause="correctable",` + gp + `,` + u + `} 7`,
		`slicemeter_gpu_remapped_rows_total{cause="uncorrectable",` + gp + `,` + u + `} 8`,
		`slicemeter_gpu_row_remap_pending{` + gp + `,` + u + `} 1`,
		`slicemeter_gpu_row_remap_failure{` + gp + `,` + u + `} 0`,
		`slicemeter_gpu_violation_seconds_total{cause="power",` + gp + `,` + u + `} 1.5`,
		`slicemeter_gpu_violation_seconds_total{cause="thermal",` + gp + `,` + u + `} 2.5`,
		`slicemeter_gpu_driver_info{cuda_version="13.0",driver_version="580.65.06",` + gp + `,` + u + `} 1`,
	}
	reasons := []string{
		`slicemeter_gpu_clocks_event_reason{` + gp + `,reason="sw_power_cap",` + u + `} 1`,
		`slicemeter_gpu_clocks_event_reason{` + gp + `,reason="hw_thermal",` + u + `} 1`,
		`slicemeter_gpu_clocks_event_reason{` + gp + `,reason="gpu_idle",` + u + `} 0`,
		`slicemeter_gpu_clocks_event_reason{` + gp + `,reason="display_clocks",` + u + `} 0`,
		`slicemeter_gpu_clocks_event_reasons{` + gp + `,` + u + `} 68`,
	}
	partial := allHealth()
	partial.Supported = exporter.HealthPCIe | exporter.HealthMemTemp
	for _, tc := range []struct {
		name    string
		health  exporter.Health
		failed  bool
		present []string
		absent  []string
	}{
		{"all reported", allHealth(), false, append(append([]string{}, all...), reasons...), nil},
		{"none reported", exporter.Health{}, false, reasons, all},
		{"some reported", partial, false, append([]string{all[0], all[1], all[5]}, reasons...), append(append([]string{}, all[2:5]...), all[6:]...)},
		{"failed GPU", allHealth(), true, nil, append(append([]string{}, all...), reasons...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := New(Options{})
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(snap)
			err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: "n",
				Samples: []*pb.Sample{{GpuIndex: 0, GpuUuid: "GPU-0", Model: "H100-SXM5-80GB", Kind: pb.Kind_KIND_GPU, InstanceId: "GPU-0"}},
				GPUs: []exporter.GPUState{{Index: 0, UUID: "GPU-0", Model: "H100-SXM5-80GB", Failed: tc.failed,
					ThrottleReasons: 0x4 | 0x40, Health: tc.health}}}})
			if err != nil {
				t.Fatal(err)
			}
			text := exposition(t, reg)
			var want []seriesWant
			for _, s := range tc.present {
				want = append(want, seriesWant{s + "\n", true})
			}
			for _, s := range tc.absent {
				want = append(want, seriesWant{s[:strings.IndexByte(s, '{')+1], false})
			}
			checkSeries(t, text, want)
			if promtool, err := exec.LookPath("promtool"); err == nil {
				cmd := exec.Command(promtool, "check", "metrics")
				cmd.Stdin = strings.NewReader(text)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("promtool check metrics: %v\n%s", err, out)
				}
			}
		})
	}
}

// A MIG instance's GPU instance id, once its GPU's state gives it, labels its info series; a
// whole GPU's stays empty.
func TestGPUInstanceIDLabelsInfo(t *testing.T) {
	snap := New(Options{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(snap)
	write := func(a []exporter.InstanceActivity) {
		t.Helper()
		err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: "n",
			Samples: []*pb.Sample{
				{GpuIndex: 0, GpuUuid: "GPU-0", Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_MIG, InstanceId: "MIG-a", Profile: "3g.20gb"},
				{GpuIndex: 1, GpuUuid: "GPU-1", Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_GPU, InstanceId: "GPU-1"},
			},
			GPUs: []exporter.GPUState{{Index: 0, UUID: "GPU-0", Model: "A100-SXM4-40GB", Instances: a},
				{Index: 1, UUID: "GPU-1", Model: "A100-SXM4-40GB", Instances: []exporter.InstanceActivity{{InstanceID: "GPU-1"}}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	mig := func(id string) string {
		return `slicemeter_instance_info{gpu="0",gpu_instance_id="` + id + `",kind="mig",model="A100-SXM4-40GB",node="n",profile="3g.20gb",slice="MIG-a",uuid="GPU-0"} 1`
	}
	whole := `slicemeter_instance_info{gpu="1",gpu_instance_id="",kind="gpu",model="A100-SXM4-40GB",node="n",profile="",slice="GPU-1",uuid="GPU-1"} 1`
	write([]exporter.InstanceActivity{{InstanceID: "MIG-a"}})
	checkSeries(t, exposition(t, reg), []seriesWant{{mig(""), true}, {whole, true}})
	write([]exporter.InstanceActivity{{InstanceID: "MIG-a", GPUInstanceID: 2, HasGPUInstanceID: true}})
	checkSeries(t, exposition(t, reg), []seriesWant{{mig("2"), true}, {mig(""), false}, {whole, true}})
}

// The GPU's PCI address is served on slicemeter_gpu_pci_info once the source reports it, also
// while the GPU cannot be read, and replaces the old series if it changes; no other series
// gains the label.
func TestPCIBusIDLabelsPCIInfo(t *testing.T) {
	snap := New(Options{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(snap)
	write := func(busID string, failed bool) string {
		t.Helper()
		err := snap.Write(context.Background(), time.Now(), []exporter.NodeSamples{{Node: "n",
			Samples: []*pb.Sample{{GpuIndex: 0, GpuUuid: "GPU-0", Model: "H100-SXM5-80GB", Kind: pb.Kind_KIND_GPU, InstanceId: "GPU-0"}},
			GPUs:    []exporter.GPUState{{Index: 0, UUID: "GPU-0", Model: "H100-SXM5-80GB", PCIBusID: busID, Failed: failed, Health: allHealth()}}}})
		if err != nil {
			t.Fatal(err)
		}
		return exposition(t, reg)
	}
	info := func(id string) string {
		return `slicemeter_gpu_pci_info{gpu="0",model="H100-SXM5-80GB",node="n",pci_bus_id="` + id + `",uuid="GPU-0"} 1` + "\n"
	}
	const up = `slicemeter_gpu_up{gpu="0",model="H100-SXM5-80GB",node="n",uuid="GPU-0"} 1` + "\n"
	const driver = `slicemeter_gpu_driver_info{cuda_version="13.0",driver_version="580.65.06",gpu="0",model="H100-SXM5-80GB",node="n",uuid="GPU-0"} 1` + "\n"
	checkSeries(t, write("", false), []seriesWant{{"slicemeter_gpu_pci_info{", false}, {up, true}})
	text := write("00000000:18:00.0", false)
	checkSeries(t, text, []seriesWant{{info("00000000:18:00.0"), true}, {up, true}, {driver, true}})
	if n := strings.Count(text, "pci_bus_id="); n != 1 {
		t.Errorf("pci_bus_id on %d series, want only slicemeter_gpu_pci_info's", n)
	}
	checkSeries(t, write("00000000:18:00.0", true), []seriesWant{{info("00000000:18:00.0"), true}, {driver, false}})
	checkSeries(t, write("00000000:2A:00.0", false), []seriesWant{{info("00000000:2A:00.0"), true}, {info("00000000:18:00.0"), false}})
}
