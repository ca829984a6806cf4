package collector

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/audit"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestAuditsAllocationEvents: every allocation event that changes an allocation — create,
// change, delete — is in the audit trail with door kafka and its topic/partition@offset,
// while a replay and a refused (overlapping) event are not. With the audit table missing,
// nothing is stored: the insert is counted as failed and retried until the table is back.
func TestAuditsAllocationEvents(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	db := localtest.Database(t, localtest.DatabaseOptions{})
	conn := db.Conn
	ctx := context.Background()
	if err := conn.Exec(ctx, "DROP TABLE "+tables.AllocationAudit); err != nil {
		t.Fatal(err)
	}
	event := func(id, tenant string, start, end int64, version uint64, deleted bool) *pb.AllocationEvent {
		return &pb.AllocationEvent{AllocationId: id, Tenant: tenant, Tier: "pro", Node: "node-a", InstanceId: "gpu0",
			RequestedAtNs: allocAt(start), StartedAtNs: allocAt(start), EndedAtNs: allocAt(end), Version: version, Deleted: deleted}
	}
	const s = int64(time.Second)
	produce(t, brokers,
		allocationMessage(t, event("k1", "acme", 10*s, 100*s, 1, false)), // offset 0: create
		allocationMessage(t, event("k1", "acme", 10*s, 50*s, 2, false)),  // 1: change
		allocationMessage(t, event("k1", "acme", 10*s, 50*s, 2, false)),  // 2: a replay
		allocationMessage(t, event("k2", "beta", 20*s, 0, 1, false)),     // 3: overlaps k1: refused
		allocationMessage(t, event("k1", "acme", 10*s, 50*s, 3, true)),   // 4: delete
	)
	c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: "audit", FlushInterval: 100 * time.Millisecond, RetryMax: 200 * time.Millisecond}, conn)
	labels := map[string]string{"table": tables.AllocationAudit}
	waitFor(t, 20*time.Second, "a failed audit insert", func() bool {
		return metricValue(t, reg, "slicemeter_collector_insert_errors_total", labels) > 0
	})
	if _, a := c.Stored(); a != 0 {
		t.Fatalf("%d allocation rows stored without their audit entries", a)
	}
	sql, err := fs.ReadFile(migrations.FS, "sql/0032_allocation_audit.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, string(sql)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "4 allocation rows stored", func() bool {
		_, a := c.Stored()
		return a == 4 // the replay is stored (it changes nothing), the overlap is not
	})
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	entries, err := audit.List(ctx, conn, audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		action        audit.Action
		origin        string
		version       uint64
		before, after string
	}{
		{audit.ActionCreate, pb.TopicAllocations + "/0@0", 1, "", `"ended_at":"2026-01-05T00:01:40Z"`},
		{audit.ActionChange, pb.TopicAllocations + "/0@1", 2, `"ended_at":"2026-01-05T00:01:40Z"`, `"ended_at":"2026-01-05T00:00:50Z"`},
		{audit.ActionDelete, pb.TopicAllocations + "/0@4", 3, `"ended_at":"2026-01-05T00:00:50Z"`, ""},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d audit entries, want %d: %+v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		if e.Door != audit.DoorKafka || e.AllocationID != "k1" || e.Tenant != "acme" || e.Action != w.action || e.Origin != w.origin || e.Version != w.version ||
			(w.before == "") != (e.Before == "") || !strings.Contains(e.Before, w.before) || (w.after == "") != (e.After == "") || !strings.Contains(e.After, w.after) {
			t.Errorf("entry %d: %+v\nwant %+v", i, e, w)
		}
	}
}

// TestAuditsKubernetesDoor: an event whose producer says door kubernetes (the exporter's
// discovery) is recorded as door kubernetes with its principal; one claiming any other door is
// door kafka without a principal, as a plain Kafka message.
func TestAuditsKubernetesDoor(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	db := localtest.Database(t, localtest.DatabaseOptions{})
	const s = int64(time.Second)
	event := func(id, instance string) *pb.AllocationEvent {
		return &pb.AllocationEvent{AllocationId: id, Tenant: "team-a", Tier: "pro", Node: "node-a", InstanceId: instance,
			RequestedAtNs: allocAt(10 * s), StartedAtNs: allocAt(10 * s), Version: 1}
	}
	k8s := allocationMessage(t, event("k8s/uid/main/gpu0", "gpu0"))
	k8s.Headers = []kafka.Header{{Key: audit.HeaderDoor, Value: []byte(audit.DoorKubernetes)}, {Key: audit.HeaderPrincipal, Value: []byte("node/node-a")}}
	forged := allocationMessage(t, event("forged", "gpu1"))
	forged.Headers = []kafka.Header{{Key: audit.HeaderDoor, Value: []byte(audit.DoorHTTP)}, {Key: audit.HeaderPrincipal, Value: []byte("admin")}}
	produce(t, brokers, k8s, forged)
	c, _, stop := startCollector(t, Config{Brokers: brokers, GroupID: "audit-k8s", FlushInterval: 100 * time.Millisecond}, db.Conn)
	waitFor(t, 20*time.Second, "2 allocation rows stored", func() bool { _, a := c.Stored(); return a == 2 })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	entries, err := audit.List(context.Background(), db.Conn, audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]audit.Entry{}
	for _, e := range entries {
		got[e.AllocationID] = e
	}
	if e := got["k8s/uid/main/gpu0"]; e.Door != audit.DoorKubernetes || e.Principal != "node/node-a" || e.Origin != pb.TopicAllocations+"/0@0" || e.Action != audit.ActionCreate {
		t.Errorf("kubernetes entry %+v; want door kubernetes, principal node/node-a, origin %s/0@0", e, pb.TopicAllocations)
	}
	if e := got["forged"]; e.Door != audit.DoorKafka || e.Principal != "" {
		t.Errorf("forged entry %+v; want door kafka without a principal", e)
	}
}
