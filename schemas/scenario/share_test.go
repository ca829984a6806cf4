package scenario

import (
	"strings"
	"testing"
)

const validShare = `version: 1
name: s
start: "2026-01-05T00:00:00Z"
duration: 1h
interval: 100ms
currency: USD
prices: {H100-SXM5-80GB: 2.40}
tiers: {pro: 1.0}
nodes:
  - name: n
    gpus:
      - {model: H100-SXM5-80GB}
      - {model: H100-SXM5-80GB, share: {mode: time_slicing, replicas: 4}}
tenants:
  - name: a
    tier: pro
    allocations:
      - {target: n/gpu1/share3, requested: 0s, ready: 5s, end: 1h, workload: {sm: 0.35, mem: 0.1}}
`

func TestParseShare(t *testing.T) {
	s, err := Parse("share.yaml", []byte(validShare))
	if err != nil {
		t.Fatal(err)
	}
	g, a := s.Nodes[0].GPUs[1], s.Tenants[0].Allocations[0]
	if g.Kind() != "share" || *g.Share != (Share{Mode: "time_slicing", Replicas: 4}) {
		t.Errorf("gpu1: kind %s, %+v", g.Kind(), g.Share)
	}
	if a.Target.Kind != "share" || a.Target.Index != 3 || a.Target.Instance != "gpu1/share3" {
		t.Errorf("target %+v", a.Target)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"mode", "mode: time_slicing", "mode: slicing", `nodes[0].gpus[1].share.mode: "slicing": expected one of time_slicing, mps`},
		{"mps", "mode: time_slicing", "mode: mps", ""},
		{"replicas 0", "replicas: 4", "replicas: 0", `nodes[0].gpus[1].share.replicas: "0": expected a whole number from 1 to 64`},
		{"replicas 65", "replicas: 4", "replicas: 65", `share.replicas: "65": expected a whole number from 1 to 64`},
		{"replicas missing", ", replicas: 4", "", `share.replicas: "": expected a whole number`},
		{"share and mig", "{model: H100-SXM5-80GB, share:", `{model: H100-SXM5-80GB, mig: ["1g.10gb"], share:`, "nodes[0].gpus[1]: a GPU is split into MIG instances, hosts vGPUs or is shared as replicas: one of mig, vgpu and share, not 2"},
		{"target past the replicas", "n/gpu1/share3", "n/gpu1/share4", `tenants[0].allocations[0].target: "n/gpu1/share4": gpu1 is shared as 4 replica(s)`},
		{"share target on a whole GPU", "n/gpu1/share3", "n/gpu0/share0", "gpu0 of n is a whole GPU"},
		{"whole target on a shared GPU", "n/gpu1/share3", "n/gpu1", "gpu1 of n is a shared (replicas) GPU"},
		{"sm finer than a percent", "sm: 0.35", "sm: 0.355", "allocations[0].workload.sm: 0.355: a share workload's sm is a whole percent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(validShare, tc.old, tc.new, 1)
			_, err := Parse("share.yaml", []byte(doc))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("accepted, want %q", tc.want)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
}
