package store_test

import (
	"context"
	"math"
	"testing"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// The tests share the binary's ClickHouse 18.16 (chtest.NewDatabase); TestMain stops it.
func TestMain(m *testing.M) { localtest.Main(m) }

// TestNoisyNeighbours: on one time-sliced H100, "steady" and "heavy" run all along, "brief"
// only for two minutes, "idle" never: each busy tenant's top neighbour is the co-tenant that
// ran most while it waited; a tenant that never waited has none. On a second one, "mixed"
// holds two vGPUs busy all along and "late" a third from 5m: mixed waited all along, behind
// another tenant in its second half only (share 0.5), late always behind mixed (share 1).
func TestNoisyNeighbours(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates a fleet into ClickHouse")
	}
	sc, err := scenario.Parse("neighbours.yaml", []byte(`version: 1
name: neighbours
start: "2026-01-05T00:00:00Z"
duration: 10m
interval: 100ms
currency: USD
prices: {H100-SXM5-80GB: 2.40}
tiers: {pro: 1.0}
nodes:
  - name: node-v
    gpus:
      - {model: H100-SXM5-80GB, vgpu: {profile: H100-20C, count: 4, scheduler: equal_share, timeslice: 2ms, switch: 20us}}
      - {model: H100-SXM5-80GB, vgpu: {profile: H100-20C, count: 4, scheduler: equal_share, timeslice: 2ms, switch: 20us}}
tenants:
  - {name: steady, tier: pro, allocations: [{target: node-v/gpu0/vgpu0, requested: 0s, ready: 0s, end: 10m, workload: {sm: 1}}]}
  - {name: heavy, tier: pro, allocations: [{target: node-v/gpu0/vgpu1, requested: 0s, ready: 0s, end: 10m, workload: {sm: 1}}]}
  - {name: brief, tier: pro, allocations: [{target: node-v/gpu0/vgpu2, requested: 0s, ready: 0s, end: 10m, workload: {steps: [[0s, 0], [4m, 1], [6m, 0]]}}]}
  - {name: idle, tier: pro, allocations: [{target: node-v/gpu0/vgpu3, requested: 0s, ready: 0s, end: 10m, workload: {sm: 0}}]}
  - {name: mixed, tier: pro, allocations: [{target: node-v/gpu1/vgpu0, requested: 0s, ready: 0s, end: 10m, workload: {sm: 1}},
                                           {target: node-v/gpu1/vgpu1, requested: 0s, ready: 0s, end: 10m, workload: {sm: 1}}]}
  - {name: late, tier: pro, allocations: [{target: node-v/gpu1/vgpu2, requested: 0s, ready: 0s, end: 10m, workload: {steps: [[0s, 0], [5m, 1]]}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	top, err := store.NoisyNeighbours(context.Background(), conn, sc.Start, sc.End())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Neighbour{ // brief: tie broken by name
		"steady": {Name: "heavy", Share: 1}, "heavy": {Name: "steady", Share: 1}, "brief": {Name: "heavy", Share: 1},
		"mixed": {Name: "late", Share: 0.5}, "late": {Name: "mixed", Share: 1},
	}
	for tenant, n := range want {
		if got := top[tenant]; got.Name != n.Name || math.Abs(got.Share-n.Share) > 0.02 {
			t.Errorf("noisy neighbour of %s = %+v, want %+v (all: %v)", tenant, got, n, top)
		}
	}
	if n, ok := top["idle"]; ok {
		t.Errorf("idle never waited, yet has neighbour %+v", n)
	}
}
