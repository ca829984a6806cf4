package collector

import (
	"context"
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
	conn := localtest.Database(t).Conn
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
