package scenario

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

func TestLoadPublicScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("expected the public scenarios in testdata, got %v (%v)", files, err)
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if s.Duration != time.Hour || s.Interval != 100*time.Millisecond || len(s.Tenants) == 0 {
			t.Errorf("%s: unexpected %+v", f, s)
		}
	}
}

// The demo's fleet (make demo) is a valid scenario with a jitter SLA.
func TestLoadDemoFleet(t *testing.T) {
	s, err := Load("../../deploy/demo/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Book.JitterP99["pro"] != 5*time.Millisecond || len(s.Nodes) != 2 {
		t.Errorf("demo fleet: %+v", s)
	}
}

func TestLoadMIGBasic(t *testing.T) {
	s, err := Load("testdata/mig-basic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gamma := s.Tenants[2]
	a := gamma.Allocations[0]
	if a.Target.Instance != "gpu1" || a.Target.Kind != "gpu" || a.Ready != 5*time.Second {
		t.Errorf("gamma allocation: %+v", a)
	}
	if got := a.Workload.SMAt(29 * time.Minute); got != 0.2 {
		t.Errorf("SMAt(29m) = %v, want 0.2", got)
	}
	if got := a.Workload.SMAt(30 * time.Minute); got != 0.6 {
		t.Errorf("SMAt(30m) = %v, want 0.6", got)
	}
	if s.Book.ColdStart["budget"] != 120*time.Second {
		t.Errorf("budget SLA = %v", s.Book.ColdStart["budget"])
	}
	if acme := s.Tenants[0].Allocations[0].Target; acme.Instance != "gpu0/mig0" || acme.Kind != "mig" {
		t.Errorf("acme target %+v", acme)
	}
}

const valid = `version: 1
name: t
start: "2026-01-05T00:00:00Z"
duration: 1h
interval: 100ms
currency: USD
prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}
tiers: {pro: 1.0}
nodes:
  - name: n
    gpus:
      - {model: A100-SXM4-40GB, mig: ["1g.5gb", "3g.20gb"]}
      - {model: H100-SXM5-80GB, vgpu: {profile: H100-20C, count: 4, scheduler: equal_share, timeslice: 2ms, switch: 20us}}
tenants:
  - name: a
    tier: pro
    allocations:
      - {target: n/gpu0/mig1, requested: 0s, ready: 5s, end: 1h, workload: {sm: 0.5, mem: 0.1}}
      - {target: n/gpu1/vgpu3, requested: 0s, ready: 5s, end: 1h, workload: {steps: [[0s, 0], [10m, 1]]}}
`

func TestLoadGPMFlag(t *testing.T) {
	s, err := Load("../../exporter/testdata/mig-nogpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, g := range s.Nodes[0].GPUs {
		got = append(got, g.NoGPM)
	}
	if want := []bool{true, false, true}; !slices.Equal(got, want) {
		t.Errorf("NoGPM per GPU %v, want %v", got, want)
	}
}

func TestParseFaults(t *testing.T) {
	doc := strings.Replace(valid, `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: thermal_throttle, at: 10m, until: 20m}, {kind: remap_failure, at: 30m}, {kind: xid, at: 5m, code: 79, count: 3}, {kind: xid, at: 6m, code: 48}, {kind: gpu_lost, at: 40m, until: 45m}]`, 1)
	s, err := Parse("faults.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := s.Nodes[0].GPUs[0].Faults
	want := []Fault{{Kind: FaultThermalThrottle, At: 10 * time.Minute, Until: 20 * time.Minute}, {Kind: FaultRemapFailure, At: 30 * time.Minute},
		{Kind: FaultXID, At: 5 * time.Minute, Code: 79, Count: 3}, {Kind: FaultXID, At: 6 * time.Minute, Code: 48, Count: 1},
		{Kind: FaultGPULost, At: 40 * time.Minute, Until: 45 * time.Minute}}
	if !slices.Equal(got, want) {
		t.Fatalf("faults %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		f    Fault
		d    time.Duration
		want bool
	}{{want[0], 10*time.Minute - 1, false}, {want[0], 10 * time.Minute, true}, {want[0], 20 * time.Minute, false}, {want[1], time.Hour, true}} {
		if got := tc.f.Active(tc.d); got != tc.want {
			t.Errorf("%+v active at %s = %v, want %v", tc.f, tc.d, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"version", "version: 1", "version: 2", "version: 2 is not supported"},
		{"unknown field", "currency: USD", "currency: USD\ncolour: red", "field colour not found"},
		{"bad duration", "duration: 1h", "duration: an hour", `duration: "an hour" is not a duration`},
		{"bad start", `start: "2026-01-05T00:00:00Z"`, `start: "yesterday"`, `start: "yesterday": expected an RFC 3339 time`},
		{"start in 2610", `start: "2026-01-05T00:00:00Z"`, `start: "2610-08-01T00:00:00Z"`, `start: "2610-08-01T00:00:00Z": expected a time from 2000-01-01T00:00:00Z to 2106-02-07T06:28:15Z`},
		{"start in 1999", `start: "2026-01-05T00:00:00Z"`, `start: "2000-01-01T00:30:00+01:00"`, `start: "2000-01-01T00:30:00+01:00": expected a time from 2000-01-01T00:00:00Z`},
		{"end after 2106", `start: "2026-01-05T00:00:00Z"`, `start: "2106-02-07T06:00:00Z"`, `duration: "1h" after start is 2106-02-07T07:00:00Z; expected a time from 2000-01-01T00:00:00Z to 2106-02-07T06:28:15Z`},
		{"allocation end after 2262", "end: 1h, workload: {sm: 0.5", "end: 2400000h, workload: {sm: 0.5", `tenants[0].allocations[0].end: "2400000h" after start is 2299-10-21T00:00:00Z; expected a time from 2000-01-01T00:00:00Z`},
		{"unknown model", "model: H100-SXM5-80GB,", "model: B300,", `nodes[0].gpus[1].model: "B300" is not a known GPU model`},
		{"unpriced model", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}", "prices: {A100-SXM4-40GB: 1.60}", `no price for GPU model "H100-SXM5-80GB"`},
		{"gpm not a bool", `mig: ["1g.5gb", "3g.20gb"]`, `gpm: sometimes, mig: ["1g.5gb", "3g.20gb"]`, "sometimes"},
		{"mig profile", `"3g.20gb"`, `"3g.40gb"`, `nodes[0].gpus[0].mig[1]: "3g.40gb" is not a MIG profile of A100-SXM4-40GB`},
		{"too many slices", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["4g.20gb", "4g.20gb"]`, "use 8 compute slices"},
		{"vgpu count", "count: 4", "count: 5", "5 × H100-20C needs 100 GiB"},
		{"target kind", "target: n/gpu0/mig1", "target: n/gpu0", "is a MIG-partitioned GPU"},
		{"target index", "target: n/gpu0/mig1", "target: n/gpu0/mig2", "gpu0 has 2 MIG instance(s)"},
		{"target node", "target: n/gpu0/mig1", "target: m/gpu0/mig1", `no node named "m"`},
		{"tier", "tier: pro", "tier: gold", `tenants[0].tier: "gold" is not in tiers`},
		{"cost unpriced model", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}\ncosts: {gpu_hour: {L40S: 1}}", `costs.gpu_hour.L40S: model not in prices`},
		{"cost negative", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}\ncosts: {gpu_hour: {A100-SXM4-40GB: -1}}", `costs.gpu_hour.A100-SXM4-40GB: "-1": expected the operator's cost`},
		{"energy not a number", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}\ncosts: {energy_kwh: cheap}", `costs.energy_kwh: "cheap": expected a price per kWh`},
		{"costs unknown field", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}", "prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}\ncosts: {rent: 1}", "field rent not found"},
		{"ready before requested", "requested: 0s, ready: 5s, end: 1h, workload: {sm: 0.5", "requested: 10s, ready: 5s, end: 1h, workload: {sm: 0.5", "allocations[0].ready: 5s is before requested"},
		{"sm range", "sm: 0.5", "sm: 1.5", `allocations[0].workload.sm: "1.5": expected an SM activity in [0, 1]`},
		{"vgpu sm", "[10m, 1]", "[10m, 0.5]", "a vGPU workload's sm is 0 or 1"},
		{"steps order", "[[0s, 0], [10m, 1]]", "[[10m, 0], [5m, 1]]", "steps[1]: offset 5m is not after"},
		{"overlap", "target: n/gpu1/vgpu3", "target: n/gpu0/mig1", "overlaps tenants[0].allocations[0]"},
		{"currency", "currency: USD", "currency: dollars", `currency: "dollars": expected an ISO 4217 code`},
		{"jitter tier", "tiers: {pro: 1.0}", "tiers: {pro: 1.0}\nsla: {jitter_p99: {gold: 5ms}}", `sla.jitter_p99.gold: tier "gold" is not in tiers`},
		{"price NaN", "H100-SXM5-80GB: 2.40}", "H100-SXM5-80GB: NaN}", `prices.H100-SXM5-80GB: "NaN": expected a finite number`},
		{"tier Inf", "tiers: {pro: 1.0}", "tiers: {pro: +Inf}", `tiers.pro: "+Inf": expected a finite number`},
		{"sm NaN", "sm: 0.5", "sm: NaN", `allocations[0].workload.sm: "NaN": expected a finite number`},
		{"mem NaN", "mem: 0.1", "mem: nan", `allocations[0].workload.mem: "nan": expected a finite number`},
		{"step sm Inf", "[10m, 1]", "[10m, Infinity]", `steps[1][1]: "Infinity": expected a finite number`},
		{"vgpu count absurd", "count: 4", "count: 9223372036854775807", `vgpu.count: "9223372036854775807": expected a whole number from 1 to 64`},
		{"vgpu count 65", "count: 4", "count: 65", `vgpu.count: "65": expected a whole number from 1 to 64`},
		{"interval over 60 s", "interval: 100ms", "interval: 61s", "interval: 1m1s: expected at most 1m0s"},
		{"reserved tenant", "  - name: a\n", "  - name: __unallocated__\n", `tenants[0].name: "__unallocated__": expected`},
		{"formula tenant", "  - name: a\n", "  - name: \"=HYPERLINK(1)\"\n", `tenants[0].name: "=HYPERLINK(1)": expected`},
		{"loop not a bool", "interval: 100ms", "interval: 100ms\nloop: forever", `loop: "forever": expected true or false`},
		{"ids unknown", "interval: 100ms", "interval: 100ms\nids: serial", `ids: "serial": expected index (gpuN/migM, the default) or uuid`},
		{"loop off the grid", "interval: 100ms", "interval: 7s\nloop: true", "loop: duration 1h0m0s is not a multiple of interval 7s"},
		{"fault kind", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: fire, at: 1m}]`, `nodes[0].gpus[0].faults[0].kind: "fire": expected one of remap_pending, remap_failure, thermal_throttle, power_cap, xid, gpu_lost`},
		{"xid without code", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: xid, at: 1m}]`, `nodes[0].gpus[0].faults[0].code: missing: an xid fault needs the XID code`},
		{"xid code 0", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: xid, at: 1m, code: 0}]`, `nodes[0].gpus[0].faults[0].code: 0: expected an XID code between 1 and 65536`},
		{"xid count huge", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: xid, at: 1m, code: 79, count: 99999999}]`, `nodes[0].gpus[0].faults[0].count: 99999999: expected 1 to 10000 errors`},
		{"code on another kind", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: gpu_lost, at: 1m, code: 79}]`, `nodes[0].gpus[0].faults[0].code: only an xid fault has a code (this one is gpu_lost)`},
		{"fault at missing", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: remap_failure}]`, `nodes[0].gpus[0].faults[0].at: missing; expected a duration`},
		{"fault after the window", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: remap_failure, at: 2h}]`, `nodes[0].gpus[0].faults[0].at: 2h is not within the scenario's duration 1h0m0s`},
		{"fault until before at", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: thermal_throttle, at: 10m, until: 5m}]`, `nodes[0].gpus[0].faults[0].until: 5m must be after at (10m)`},
		{"fault unknown field", `mig: ["1g.5gb", "3g.20gb"]`, `mig: ["1g.5gb", "3g.20gb"], faults: [{kind: remap_failure, at: 1m, gpu: 3}]`, "field gpu not found"},
		{"jitter zero", "tiers: {pro: 1.0}", "tiers: {pro: 1.0}\nsla: {jitter_p99: {pro: 0s}}", `sla.jitter_p99.pro: "0s": expected a duration > 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(valid, tt.old, tt.new, 1)
			if doc == valid {
				t.Fatalf("replacement %q not found", tt.old)
			}
			_, err := Parse("bad.yaml", []byte(doc))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "bad.yaml") {
				t.Errorf("error %q\nwant it to contain %q and the file name", err, tt.want)
			}
		})
	}
	if _, err := Parse("ok.yaml", []byte(valid)); err != nil {
		t.Fatalf("valid scenario: %v", err)
	}
}

func TestParseIDs(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool
	}{{"", false}, {"ids: index\n", false}, {"ids: uuid\n", true}} {
		s, err := Parse("ids.yaml", []byte(strings.Replace(valid, "currency: USD\n", "currency: USD\n"+tc.yaml, 1)))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if s.UUIDs != tc.want {
			t.Errorf("%q: UUIDs %v, want %v", tc.yaml, s.UUIDs, tc.want)
		}
	}
}

func TestParseLoop(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool
	}{{"", false}, {"loop: false\n", false}, {"loop: true\n", true}} {
		s, err := Parse("loop.yaml", []byte(strings.Replace(valid, "currency: USD\n", "currency: USD\n"+tc.yaml, 1)))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if s.Loop != tc.want {
			t.Errorf("%q: Loop %v, want %v", tc.yaml, s.Loop, tc.want)
		}
	}
}

// Counts that would make the simulator exhaust memory are refused, naming the field.
func TestParseRefusesHugeCounts(t *testing.T) {
	gpu := "      - {model: A100-SXM4-40GB}\n"
	node := func(name string, gpus int) string {
		return "  - name: " + name + "\n    gpus:\n" + strings.Repeat(gpu, gpus)
	}
	head := strings.SplitAfter(valid, "nodes:\n")[0]
	var many strings.Builder
	for i := range MaxNodes + 1 {
		many.WriteString(node(fmt.Sprintf("n%d", i), 1))
	}
	for _, tc := range []struct{ name, nodes, want string }{
		{"too many GPUs", node("n", MaxGPUsPerNode+1), "nodes[0].gpus: 17 GPUs: expected at most 16 per node"},
		{"too many nodes", many.String(), "nodes: 10001 nodes: expected at most 10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("big.yaml", []byte(head+tc.nodes))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Parse("ok.yaml", []byte(head+node("n", MaxGPUsPerNode))); err != nil {
		t.Errorf("%d GPUs on a node refused: %v", MaxGPUsPerNode, err)
	}
}

// Every level within its cap, the product beyond what the simulator can hold: the total of
// instances is refused, naming the file and the figure.
func TestParseRefusesHugeFleets(t *testing.T) {
	head := strings.SplitAfter(valid, "nodes:\n")[0]
	fleet := func(nodes int, gpu string) string {
		var b strings.Builder
		b.WriteString(head)
		for i := range nodes {
			fmt.Fprintf(&b, "  - name: n%d\n    gpus:\n%s", i, strings.Repeat("      - "+gpu+"\n", MaxGPUsPerNode))
		}
		return b.String()
	}
	shared := "{model: A100-SXM4-40GB, share: {mode: time_slicing, replicas: 64}}"                                // 1,024 instances a node
	mig := `{model: A100-SXM4-40GB, mig: ["1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb"]}` // 112 a node
	for _, tc := range []struct {
		name  string
		doc   string
		total int // 0: accepted
	}{
		{"195 nodes of shared GPUs", fleet(195, shared), 0},
		{"196 nodes of shared GPUs", fleet(196, shared), 196 * 1024},
		{"MIG on 1,786 nodes", fleet(1786, mig), 1786 * 112},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("fleet.yaml", []byte(tc.doc))
			switch {
			case tc.total == 0 && err != nil:
				t.Errorf("refused: %v", err)
			case tc.total == 0:
			case err == nil:
				t.Errorf("%d instances accepted", tc.total)
			case !strings.Contains(err.Error(), fmt.Sprintf("scenario fleet.yaml: nodes: %d instances", tc.total)) ||
				!strings.Contains(err.Error(), fmt.Sprintf("expected at most %d", MaxInstances)):
				t.Errorf("error %v, want the file, the field nodes, %d instances and the cap", err, tc.total)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err == nil && (s.Interval <= 0 || s.Duration <= 0 || len(s.Nodes) == 0) {
			t.Fatalf("accepted an invalid scenario: %+v", s)
		}
	})
}

// A scenario's price book: what its sla names, and the default cold-start limit written in
// for every other tier (pricebook.FromScenario's test, before the scenario carried the book).
func TestScenarioBook(t *testing.T) {
	s, err := Parse("book.yaml", []byte(strings.Replace(valid, "tiers: {pro: 1.0}", "tiers: {pro: 1.0, budget: 0.7}\nsla: {cold_start: {budget: 2m}}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.Book.Price("H100-SXM5-80GB"); err != nil || p != 2.40 {
		t.Errorf("Price = %v, %v; want 2.40", p, err)
	}
	if s.Book.ColdStartSLA("budget") != 2*time.Minute || s.Book.ColdStartSLA("pro") != pricebook.DefaultColdStartSLA ||
		s.Book.ColdStart["pro"] != pricebook.DefaultColdStartSLA {
		t.Errorf("cold-start SLAs: got %v", s.Book.ColdStart)
	}
	_, err = Parse("bad.yaml", []byte(strings.Replace(valid, "currency: USD", "currency: usd", 1)))
	var e *pricebook.Error
	if !errors.As(err, &e) || e.Field != "currency" || e.Got != `"usd"` {
		t.Errorf("a scenario's book refused: %v, want a *pricebook.Error for currency", err)
	}
}
