package collector

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestRefusesOverlappingAllocations: an allocation event that would hold an instance while
// another live allocation holds it is refused as the HTTP API refuses it — not stored, sent to
// the dead-letter topic with a reason naming both, counted — while a newer version of an
// allocation never overlaps itself, and a refused event blocks nothing.
func TestRefusesOverlappingAllocations(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	event := func(id, tenant string, start, end int64, version uint64) *pb.AllocationEvent {
		return &pb.AllocationEvent{AllocationId: id, Tenant: tenant, Tier: "pro", Node: "node-a", InstanceId: "gpu0",
			RequestedAtNs: allocAt(start), StartedAtNs: allocAt(start), EndedAtNs: allocAt(end), Version: version}
	}
	const s = int64(time.Second)
	produce(t, brokers,
		allocationMessage(t, event("o1", "acme", 10*s, 100*s, 1)),
		allocationMessage(t, event("o2", "beta", 50*s, 0, 1)),      // overlaps o1: refused
		allocationMessage(t, event("o1", "acme", 10*s, 50*s, 2)),   // o1 ends earlier: not an overlap with itself
		allocationMessage(t, event("o3", "gamma", 50*s, 100*s, 1)), // follows o1 back to back; o2 was refused
		allocationMessage(t, event("o4", "delta", 90*s, 120*s, 1)), // overlaps o3
	)
	c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: "overlaps", FlushInterval: 100 * time.Millisecond}, conn)
	waitFor(t, 20*time.Second, "3 allocation rows stored", func() bool {
		_, a := c.Stored()
		return a == 3
	})
	dead := readDeadLetters(t, brokers, 2)
	for i, want := range [][]string{{`"o2" of tenant "beta"`, `"o1" of tenant "acme"`, "node-a/gpu0"}, {`"o4"`, `"o3"`}} {
		if got := header(dead[i], HeaderReason); got != reasonOverlap {
			t.Errorf("dead letter %d: reason %q, want %q", i, got, reasonOverlap)
		}
		for _, name := range want {
			if d := header(dead[i], HeaderReasonDetail); !strings.Contains(d, name) {
				t.Errorf("dead letter %d: detail %q does not name %s", i, d, name)
			}
		}
	}
	var ids string
	if err := conn.QueryRow(context.Background(), `SELECT arrayStringConcat(groupArray(concat(allocation_id, 'v', toString(version))), ' ')
        FROM (SELECT allocation_id, version FROM allocations ORDER BY allocation_id, version)`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if ids != "o1v1 o1v2 o3v1" {
		t.Errorf("allocations stored: %s, want o1v1 o1v2 o3v1", ids)
	}
	if got := metricValue(t, reg, "slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicAllocations, "reason": reasonOverlap}); got != 2 {
		t.Errorf("dead-lettered for overlaps: %v, want 2", got)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestRefusesTenantMoves: an allocation event that changes a live allocation's tenant is
// dead-lettered (reason tenant_move, counted) unless AllowTenantMoves, as only an operator may
// do it over HTTP. A second move of the same allocation in the same batch is refused too (the
// first, refused, did not change the state), while a change that keeps the tenant, and a
// deleted allocation created anew for another tenant, are stored.
func TestRefusesTenantMoves(t *testing.T) {
	const s = int64(time.Second)
	event := func(id, tenant, instance string, end int64, version uint64, deleted bool) *pb.AllocationEvent {
		return &pb.AllocationEvent{AllocationId: id, Tenant: tenant, Tier: "pro", Node: "node-a", InstanceId: instance,
			RequestedAtNs: allocAt(10 * s), StartedAtNs: allocAt(10 * s), EndedAtNs: allocAt(end), Version: version, Deleted: deleted}
	}
	tests := []struct {
		allow  bool
		stored string // allocation_id v version, in order
		dead   int
	}{
		{false, "m1v1 m1v4 m2v1 m2v2 m2v3", 2},
		{true, "m1v1 m1v2 m1v3 m1v4 m2v1 m2v2 m2v3", 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("allow=%v", tt.allow), func(t *testing.T) {
			brokers := localtest.FakeKafka(t)
			conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
			produce(t, brokers,
				allocationMessage(t, event("m1", "acme", "gpu0", 0, 1, false)),
				allocationMessage(t, event("m1", "beta", "gpu0", 0, 2, false)), // a move
				allocationMessage(t, event("m1", "beta", "gpu0", 0, 3, false)), // again: still a move from acme
				allocationMessage(t, event("m1", "acme", "gpu0", 90*s, 4, false)),
				allocationMessage(t, event("m2", "acme", "gpu1", 0, 1, false)),
				allocationMessage(t, event("m2", "acme", "gpu1", 0, 2, true)),  // deleted
				allocationMessage(t, event("m2", "beta", "gpu1", 0, 3, false)), // created anew: not a move
			)
			c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: "moves", FlushInterval: 100 * time.Millisecond, AllowTenantMoves: tt.allow}, conn)
			want := len(strings.Fields(tt.stored))
			waitFor(t, 20*time.Second, fmt.Sprintf("%d allocation rows stored", want), func() bool {
				_, a := c.Stored()
				return a == uint64(want)
			})
			if tt.dead > 0 {
				for i, d := range readDeadLetters(t, brokers, tt.dead) {
					if got := header(d, HeaderReason); got != reasonTenantMove {
						t.Errorf("dead letter %d: reason %q, want %q", i, got, reasonTenantMove)
					}
					if d := header(d, HeaderReasonDetail); !strings.Contains(d, `"m1"`) || !strings.Contains(d, `"acme"`) || !strings.Contains(d, `"beta"`) || !strings.Contains(d, "--collector.allow-tenant-moves") {
						t.Errorf("dead letter %d: detail %q does not name the allocation, both tenants and the flag", i, d)
					}
				}
			}
			if err := stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
			var ids string
			if err := conn.QueryRow(context.Background(), `SELECT arrayStringConcat(groupArray(concat(allocation_id, 'v', toString(version))), ' ')
        FROM (SELECT allocation_id, version FROM allocations ORDER BY allocation_id, version)`).Scan(&ids); err != nil {
				t.Fatal(err)
			}
			if ids != tt.stored {
				t.Errorf("allocations stored: %s, want %s", ids, tt.stored)
			}
			if got := metricValue(t, reg, "slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicAllocations, "reason": reasonTenantMove}); got != float64(tt.dead) {
				t.Errorf("dead-lettered for tenant moves: %v, want %d", got, tt.dead)
			}
		})
	}
}
