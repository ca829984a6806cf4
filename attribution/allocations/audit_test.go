package allocations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit"
)

// TestPutAudits: every allocation Put writes is in the audit trail, with who wrote it and
// the row before and after; a repeat writes no entry; and when the entries cannot be
// written, neither is the allocation.
func TestPutAudits(t *testing.T) {
	ctx := context.Background()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	store := allocations.NewStore(conn)
	ops := audit.Actor{Door: audit.DoorHTTP, Principal: "ops", Role: "operator", Origin: "127.0.0.1:4000"}
	cli := audit.Actor{Door: audit.DoorImport, Principal: "alice", Role: "cli", Origin: "host:allocs.csv"}
	a := allocation.Allocation{ID: "au1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: "gpu0", RequestedAt: t0, StartedAt: t0}
	b := allocation.Allocation{ID: "au2", Tenant: "beta", Tier: "pro", Node: "node-a", Instance: "gpu1", RequestedAt: t0, StartedAt: t0}
	if _, err := store.Put(ctx, cli, []allocation.Allocation{a, b}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, cli, []allocation.Allocation{a}); err != nil { // unchanged: no entry
		t.Fatal(err)
	}
	moved := a
	moved.Tenant, moved.EndedAt = "gamma", t0.Add(time.Hour)
	if _, err := store.Put(ctx, ops, []allocation.Allocation{moved}); err != nil {
		t.Fatal(err)
	}
	entries, err := audit.List(ctx, conn, audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		door                     audit.Door
		principal, role, origin  string
		action                   audit.Action
		id, tenant, beforeTenant string
		version                  uint64
		before, after            string // substrings; "" for an empty one
	}
	want := []row{
		{audit.DoorImport, "alice", "cli", "host:allocs.csv", audit.ActionCreate, "au1", "acme", "", 1, "", `"tenant":"acme"`},
		{audit.DoorImport, "alice", "cli", "host:allocs.csv", audit.ActionCreate, "au2", "beta", "", 1, "", `"tenant":"beta"`},
		{audit.DoorHTTP, "ops", "operator", "127.0.0.1:4000", audit.ActionChange, "au1", "gamma", "acme", 2, `"ended_at":null`, `"ended_at":"2026-01-05T01:00:00Z"`},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		got := row{e.Door, e.Principal, e.Role, e.Origin, e.Action, e.AllocationID, e.Tenant, e.BeforeTenant, e.Version, e.Before, e.After}
		match := func(s, sub string) bool { return sub == "" && s == "" || sub != "" && strings.Contains(s, sub) }
		if got.door != w.door || got.principal != w.principal || got.role != w.role || got.origin != w.origin || got.action != w.action ||
			got.id != w.id || got.tenant != w.tenant || got.beforeTenant != w.beforeTenant || got.version != w.version ||
			!match(got.before, w.before) || !match(got.after, w.after) {
			t.Errorf("entry %d: %+v\nwant %+v", i, got, w)
		}
		if e.At.Before(time.Now().Add(-time.Hour)) || e.At.After(time.Now().Add(time.Hour)) {
			t.Errorf("entry %d at %s: not the time of the write", i, e.At)
		}
	}
	for _, q := range []struct {
		q    audit.Query
		want int
	}{
		{audit.Query{AllocationID: "au1"}, 2},
		{audit.Query{Tenant: "acme"}, 2}, // the create, and the move away (before_tenant)
		{audit.Query{Tenant: "beta"}, 1},
		{audit.Query{Limit: 1}, 1},
		{audit.Query{From: time.Now().Add(time.Hour)}, 0},
		{audit.Query{To: time.Now().Add(-time.Hour)}, 0},
		{audit.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}, 3},
	} {
		if got, err := audit.List(ctx, conn, q.q); err != nil || len(got) != q.want {
			t.Errorf("List(%+v): %d entries, %v; want %d", q.q, len(got), err, q.want)
		}
	}

	// No audit table: the write fails, and nothing of it is stored.
	if err := conn.Exec(ctx, "DROP TABLE allocation_audit"); err != nil {
		t.Fatal(err)
	}
	c := allocation.Allocation{ID: "au3", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: "gpu2", RequestedAt: t0, StartedAt: t0}
	if _, err := store.Put(ctx, cli, []allocation.Allocation{c}); err == nil || !strings.Contains(err.Error(), "allocation_audit") {
		t.Fatalf("Put without the audit table: %v; want an error naming allocation_audit", err)
	}
	if list, err := store.List(ctx, "", time.Time{}, time.Time{}); err != nil || len(list) != 2 {
		t.Errorf("after the failed write: %d allocations, %v; want the 2 before it", len(list), err)
	}
}
