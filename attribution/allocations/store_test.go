package allocations_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// The ClickHouse test shares the binary's server (localtest.Database); TestMain stops it.
func TestMain(m *testing.M) { localtest.Main(m) }

// TestStore stores allocations in ClickHouse: new, repeated, changed,
// overlapping (refused, nothing written), for an instance never sampled (accepted, flagged).
func TestStore(t *testing.T) {
	ctx := context.Background()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	const sampled = "gpu0/mig1"
	// One sample of the instance, so that its allocations are not flagged unseen.
	sample, err := conn.PrepareBatch(ctx, `INSERT INTO samples (time, ts_ns, interval_ns, node, instance_id, kind)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Append(t0, uint64(t0.UnixNano()), uint64(time.Second), "node-a", sampled, "mig"); err != nil {
		t.Fatal(err)
	}
	if err := sample.Send(); err != nil {
		t.Fatal(err)
	}
	store := allocations.NewStore(conn)
	alloc := func(id, tenant, instance string, from, to time.Duration) allocation.Allocation {
		a := allocation.Allocation{ID: id, Tenant: tenant, Tier: "pro", Node: "node-a", Instance: instance, RequestedAt: t0.Add(from), StartedAt: t0.Add(from)}
		if to > 0 {
			a.EndedAt = t0.Add(to)
		}
		return a
	}
	a1 := alloc("a1", "acme", sampled, 0, time.Hour)
	res, err := store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, []allocation.Allocation{a1, alloc("b1", "beta", "gpu7", 0, 0)})
	if err != nil || len(res.Stored) != 2 || len(res.Unseen) != 1 || res.Unseen[0] != "node-a/gpu7" {
		t.Fatalf("first put: %+v, %v; want 2 stored and node-a/gpu7 unseen", res, err)
	}
	if res, err = store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, []allocation.Allocation{a1}); err != nil || len(res.Unchanged) != 1 || len(res.Stored) != 0 {
		t.Fatalf("repeat: %+v, %v; want it unchanged", res, err)
	}
	// The allocation ends earlier: a new version; then another tenant may follow it.
	a1.EndedAt = t0.Add(30 * time.Minute)
	if res, err = store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, []allocation.Allocation{a1}); err != nil || len(res.Stored) != 1 {
		t.Fatalf("change: %+v, %v", res, err)
	}
	// Overlapping a1 on its instance: the whole batch is refused and nothing of it written.
	_, err = store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, []allocation.Allocation{alloc("c1", "gamma", "gpu9", 0, 0), alloc("c2", "gamma", sampled, 20*time.Minute, time.Hour)})
	if !errors.Is(err, allocations.ErrRefused) || !strings.Contains(err.Error(), `"c2" of tenant "gamma"`) || !strings.Contains(err.Error(), `"a1" of tenant "acme"`) {
		t.Fatalf("overlap: %v; want a refusal naming c2 and a1", err)
	}
	if res, err = store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, []allocation.Allocation{alloc("c2", "gamma", sampled, 30*time.Minute, time.Hour)}); err != nil || len(res.Stored) != 1 {
		t.Fatalf("back to back: %+v, %v", res, err)
	}
	_, err = store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, []allocation.Allocation{alloc("d1", "x", "gpu5", 0, 0), alloc("d1", "x", "gpu6", 0, 0)})
	if !errors.Is(err, allocations.ErrRefused) || !strings.Contains(err.Error(), `"d1" is given twice`) {
		t.Fatalf("id twice: %v", err)
	}

	ids := func(tenant string, from, to time.Time) string {
		t.Helper()
		list, err := store.List(ctx, tenant, from, to)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range list {
			out = append(out, a.ID+"@"+a.EndedAt.Format("15:04"))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		tenant   string
		from, to time.Time
		want     string
	}{
		{"", time.Time{}, time.Time{}, "a1@00:30 b1@00:00 c2@01:00"},
		{"acme", time.Time{}, time.Time{}, "a1@00:30"},
		{"", t0.Add(40 * time.Minute), time.Time{}, "b1@00:00 c2@01:00"},
		{"gamma", t0, t0.Add(30 * time.Minute), ""},
	} {
		if got := ids(tc.tenant, tc.from, tc.to); got != tc.want {
			t.Errorf("List(%q, %s, %s) = %q, want %q", tc.tenant, tc.from.Format(time.RFC3339), tc.to.Format(time.RFC3339), got, tc.want)
		}
	}
}

// TestStoreChunked: with lookups of two ids and inserts of two rows, five allocations take
// three of each; an overlap with a stored allocation in the last lookup chunk is still found,
// and a repeat finds every one unchanged.
func TestStoreChunked(t *testing.T) {
	ctx := context.Background()
	store := allocations.NewStore(localtest.Database(t, localtest.DatabaseOptions{}).Conn)
	allocations.SetLimits(store, 2*(len("bulk-0000000")+4), 2)
	allocs := bulk(5, 5)
	if res, err := store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, allocs); err != nil || len(res.Stored) != 5 {
		t.Fatalf("put: %+v, %v", res, err)
	}
	if res, err := store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, allocs); err != nil || len(res.Unchanged) != 5 {
		t.Fatalf("repeat: %+v, %v", res, err)
	}
	list, err := store.List(ctx, "", time.Time{}, time.Time{})
	if err != nil || len(list) != 5 {
		t.Fatalf("list: %d, %v", len(list), err)
	}
	clash := allocs[4]
	clash.ID = "clash"
	if _, err := store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, append(bulk(4, 4)[:4:4], clash)); !errors.Is(err, allocations.ErrRefused) || !strings.Contains(err.Error(), `overlaps allocation "bulk-0000004"`) {
		t.Fatalf("overlap with the fifth: %v", err)
	}
}

// TestPutChecked: the check sees each change of a stored allocation with its current state, and
// its refusal writes nothing of the input; new and unchanged allocations are not asked about.
func TestPutChecked(t *testing.T) {
	ctx := context.Background()
	store := allocations.NewStore(localtest.Database(t, localtest.DatabaseOptions{}).Conn)
	a := allocation.Allocation{ID: "m1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: "gpu0", RequestedAt: t0, StartedAt: t0}
	var asked []string
	refuseMoves := func(prev, next allocation.Allocation) error {
		asked = append(asked, prev.ID+":"+prev.Tenant+">"+next.Tenant)
		if prev.Tenant != next.Tenant {
			return errors.New("moved")
		}
		return nil
	}
	if _, err := store.PutChecked(ctx, audit.Actor{Door: audit.DoorHTTP, Principal: "test"}, []allocation.Allocation{a}, refuseMoves); err != nil || len(asked) != 0 {
		t.Fatalf("new: %v, asked %v; want stored, nothing asked", err, asked)
	}
	moved, other := a, allocation.Allocation{ID: "m2", Tenant: "beta", Tier: "pro", Node: "node-a", Instance: "gpu1", RequestedAt: t0, StartedAt: t0}
	moved.Tenant = "beta"
	if _, err := store.PutChecked(ctx, audit.Actor{Door: audit.DoorHTTP, Principal: "test"}, []allocation.Allocation{other, moved}, refuseMoves); err == nil || err.Error() != "moved" {
		t.Fatalf("move: %v; want the check's error", err)
	}
	if got := strings.Join(asked, " "); got != "m1:acme>beta" {
		t.Errorf("asked %q; want only m1's move", got)
	}
	list, err := store.List(ctx, "", time.Time{}, time.Time{})
	if err != nil || len(list) != 1 || list[0].Tenant != "acme" {
		t.Errorf("after the refused move: %+v, %v; want m1 of acme alone", list, err)
	}
	a.EndedAt = t0.Add(time.Hour)
	if _, err := store.PutChecked(ctx, audit.Actor{Door: audit.DoorHTTP, Principal: "test"}, []allocation.Allocation{a}, refuseMoves); err != nil {
		t.Errorf("a change within the tenant: %v", err)
	}
}

// An allocation deleted through Kafka (a version that deletes it, as the collector writes one)
// and given again over HTTP or import is created anew above the deletion, not hidden under it.
func TestPutAfterDeletion(t *testing.T) {
	ctx := context.Background()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ins, err := conn.PrepareBatch(ctx, tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		t.Fatal(err)
	}
	ns := t0.UnixNano()
	for _, v := range []struct {
		version uint64
		deleted uint8
	}{{4, 0}, {5, 1}} {
		if err := ins.Append("d1", "acme", "pro", "node-a", "gpu0", ns, ns, int64(0), v.version, v.deleted, t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ins.Send(); err != nil {
		t.Fatal(err)
	}
	store := allocations.NewStore(conn)
	a := allocation.Allocation{ID: "d1", Tenant: "beta", Tier: "pro", Node: "node-a", Instance: "gpu0", RequestedAt: t0, StartedAt: t0}
	res, err := store.Put(ctx, audit.Actor{Door: audit.DoorHTTP, Principal: "test"}, []allocation.Allocation{a})
	if err != nil || len(res.Stored) != 1 {
		t.Fatalf("put after deletion: %+v, %v; want it stored", res, err)
	}
	got, err := store.List(ctx, "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Tenant != "beta" {
		t.Fatalf("after re-creating a deleted allocation: %+v, want d1 of beta", got)
	}
	// Its audit entry is a creation (nothing before it): the deleted row is not its past state.
	var before string
	if err := conn.QueryRow(ctx, "SELECT before FROM allocation_audit WHERE allocation_id = 'd1'").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before != "" {
		t.Errorf("audit before = %q, want empty (a creation)", before)
	}
}

// TestPutAfterMaximalVersion: an allocation stored at a version no change can follow (the top
// of UInt64, from a Kafka event before the collector refused such versions) is not changed by
// a Put, which is refused naming the allocation and its version: nothing is written or audited,
// and the stored state stays what it was. Before, the next version wrapped to 0: the Put
// answered "stored" and audited version 0 while ClickHouse kept the old state. An allocation
// at the highest version a door accepts (Int64's top) still takes a change.
func TestPutAfterMaximalVersion(t *testing.T) {
	ctx := context.Background()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ins, err := conn.PrepareBatch(ctx, tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		t.Fatal(err)
	}
	ns := t0.UnixNano()
	for id, version := range map[string]uint64{"max": math.MaxUint64, "int64": math.MaxInt64} {
		if err := ins.Append(id, "acme", "pro", "node-a", "gpu-"+id, ns, ns, int64(0), version, uint8(0), t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ins.Send(); err != nil {
		t.Fatal(err)
	}
	store := allocations.NewStore(conn)
	who := audit.Actor{Door: audit.DoorHTTP, Principal: "test"}
	ended := func(id string) allocation.Allocation {
		return allocation.Allocation{ID: id, Tenant: "acme", Tier: "pro", Node: "node-a", Instance: "gpu-" + id, RequestedAt: t0, StartedAt: t0, EndedAt: t0.Add(time.Hour)}
	}
	res, err := store.Put(ctx, who, []allocation.Allocation{ended("max")})
	if !errors.Is(err, allocations.ErrRefused) || len(res.Stored) != 0 || !strings.Contains(err.Error(), `"max"`) || !strings.Contains(err.Error(), "18446744073709551615") {
		t.Fatalf("change after version 2^64-1: %+v, %v; want it refused naming the allocation and its version", res, err)
	}
	var audited uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM allocation_audit WHERE allocation_id = 'max'").Scan(&audited); err != nil || audited != 0 {
		t.Errorf("audit entries of the refused change: %d (%v), want none", audited, err)
	}
	if res, err = store.Put(ctx, who, []allocation.Allocation{ended("int64")}); err != nil || len(res.Stored) != 1 {
		t.Fatalf("change after version 2^63-1: %+v, %v; want it stored", res, err)
	}
	got, err := store.List(ctx, "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if running := a.EndedAt.IsZero(); running != (a.ID == "max") {
			t.Errorf("%s: ended %v; want only the int64 one changed (ended)", a.ID, a.EndedAt)
		}
	}
	var version uint64
	if err := conn.QueryRow(ctx, "SELECT max(version) FROM allocations WHERE allocation_id = 'int64'").Scan(&version); err != nil || version != math.MaxInt64+1 {
		t.Errorf("version of the change: %d (%v), want 2^63", version, err)
	}
}
