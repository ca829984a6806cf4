package sim

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/schemas/scenario"
)

const uuidsScenario = `version: 1
name: uuids
start: "2026-01-05T00:00:00Z"
duration: 1s
interval: 100ms
currency: USD
prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}
tiers: {pro: 1.0}
nodes:
  - name: node-a
    gpus:
      - {model: A100-SXM4-40GB, mig: ["3g.20gb", "3g.20gb"]}
      - {model: H100-SXM5-80GB}
      - {model: H100-SXM5-80GB, share: {mode: time_slicing, replicas: 2}}
      - {model: H100-SXM5-80GB, vgpu: {profile: H100-20C, count: 2, scheduler: equal_share, timeslice: 2ms, switch: 20us}}
tenants:
  - name: a
    tier: pro
    allocations:
      - {target: node-a/gpu2/share1, requested: 0s, ready: 0s, end: 1s, workload: {sm: 0.5, mem: 0.5}}
`

// With ids: uuid the samples carry the ids UUIDs gives (device-plugin forms for every kind),
// and with the default the scenario's index names.
func TestUUIDs(t *testing.T) {
	forms := map[string]*regexp.Regexp{
		"node-a/gpu0/mig0":   regexp.MustCompile(`^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`),
		"node-a/gpu0/mig1":   regexp.MustCompile(`^MIG-[0-9a-f-]{36}$`),
		"node-a/gpu1":        regexp.MustCompile(`^GPU-[0-9a-f-]{36}$`),
		"node-a/gpu2/share0": regexp.MustCompile(`^GPU-[0-9a-f-]{36}::0$`),
		"node-a/gpu2/share1": regexp.MustCompile(`^GPU-[0-9a-f-]{36}::1$`),
		"node-a/gpu3/vgpu0":  regexp.MustCompile(`^[0-9a-f-]{36}$`),
		"node-a/gpu3/vgpu1":  regexp.MustCompile(`^[0-9a-f-]{36}$`),
	}
	for _, ids := range []string{"", "ids: uuid\n"} {
		sc, err := scenario.Parse("uuids.yaml", []byte(strings.Replace(uuidsScenario, "currency: USD\n", "currency: USD\n"+ids, 1)))
		if err != nil {
			t.Fatal(err)
		}
		uuids, err := UUIDs(sc)
		if err != nil {
			t.Fatal(err)
		}
		if len(uuids) != len(forms) {
			t.Fatalf("UUIDs: %d instances %v, want %d", len(uuids), uuids, len(forms))
		}
		want := map[string]string{} // sample instance id → target
		for target, re := range forms {
			if !re.MatchString(uuids[target]) {
				t.Errorf("UUIDs[%s] = %q, want the form %s", target, uuids[target], re)
			}
			id := uuids[target]
			if !sc.UUIDs {
				id = strings.TrimPrefix(target, "node-a/")
			}
			want[id] = target
		}
		src, err := New(sc, "", Options{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := src.Read(context.Background(), sc.Start.Add(5*sc.Interval), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, ns := range out {
			for _, s := range ns.Samples {
				if _, ok := want[s.InstanceId]; !ok {
					t.Errorf("%q: a sample of instance %q, not one of %v", ids, s.InstanceId, want)
				}
				seen[s.InstanceId] = true
			}
		}
		if len(seen) != len(want) {
			t.Errorf("%q: samples of %d instances %v, want %d", ids, len(seen), seen, len(want))
		}
	}
}
