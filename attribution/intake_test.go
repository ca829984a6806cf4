package attribution_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/intake"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestIntakeStore stores allocations in ClickHouse through the intake: new, repeated, changed,
// overlapping (refused, nothing written), for an instance never sampled (accepted, flagged).
func TestIntakeStore(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	ctx := context.Background()
	conn := newDatabase(t)
	insertSamples(t, conn, "node-a", []*pb.Sample{migA100.sample(0, time.Second, true, 0.5)})
	store := intake.NewStore(conn)
	alloc := func(id, tenant, instance string, from, to time.Duration) intake.Allocation {
		a := intake.Allocation{ID: id, Tenant: tenant, Tier: "pro", Node: "node-a", Instance: instance, RequestedAt: t0.Add(from), StartedAt: t0.Add(from)}
		if to > 0 {
			a.EndedAt = t0.Add(to)
		}
		return a
	}
	a1 := alloc("a1", "acme", migA100.id, 0, time.Hour)
	res, err := store.Put(ctx, []intake.Allocation{a1, alloc("b1", "beta", "gpu7", 0, 0)})
	if err != nil || len(res.Stored) != 2 || len(res.Unseen) != 1 || res.Unseen[0] != "node-a/gpu7" {
		t.Fatalf("first put: %+v, %v; want 2 stored and node-a/gpu7 unseen", res, err)
	}
	if res, err = store.Put(ctx, []intake.Allocation{a1}); err != nil || len(res.Unchanged) != 1 || len(res.Stored) != 0 {
		t.Fatalf("repeat: %+v, %v; want it unchanged", res, err)
	}
	// The allocation ends earlier: a new version; then another tenant may follow it.
	a1.EndedAt = t0.Add(30 * time.Minute)
	if res, err = store.Put(ctx, []intake.Allocation{a1}); err != nil || len(res.Stored) != 1 {
		t.Fatalf("change: %+v, %v", res, err)
	}
	// Overlapping a1 on its instance: the whole batch is refused and nothing of it written.
	_, err = store.Put(ctx, []intake.Allocation{alloc("c1", "gamma", "gpu9", 0, 0), alloc("c2", "gamma", migA100.id, 20*time.Minute, time.Hour)})
	if !errors.Is(err, intake.ErrRefused) || !strings.Contains(err.Error(), `"c2" of tenant "gamma"`) || !strings.Contains(err.Error(), `"a1" of tenant "acme"`) {
		t.Fatalf("overlap: %v; want a refusal naming c2 and a1", err)
	}
	if res, err = store.Put(ctx, []intake.Allocation{alloc("c2", "gamma", migA100.id, 30*time.Minute, time.Hour)}); err != nil || len(res.Stored) != 1 {
		t.Fatalf("back to back: %+v, %v", res, err)
	}
	_, err = store.Put(ctx, []intake.Allocation{alloc("d1", "x", "gpu5", 0, 0), alloc("d1", "x", "gpu6", 0, 0)})
	if !errors.Is(err, intake.ErrRefused) || !strings.Contains(err.Error(), `"d1" is given twice`) {
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

// TestIntakeEvents checks Kafka allocation events against the stored allocations and each other
// with the HTTP API's overlap rule: an overlap is refused naming both allocations; a newer
// version of an allocation never overlaps itself; replays, deletions and refused events do not
// block an instance.
func TestIntakeEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	ctx := context.Background()
	conn := newDatabase(t)
	row := func(id, instance string, from, to time.Duration, version uint64, deleted bool) allocationRow {
		r := allocationRow{id: id, tenant: "t-" + id, tier: "pro", node: "node-a", instance: instance,
			requested: t0.Add(from), started: t0.Add(from), version: version, deleted: deleted}
		if to > 0 {
			r.ended = t0.Add(to)
		}
		return r
	}
	insertAllocations(t, conn, []allocationRow{
		row("a1", "gpu0", 0, time.Hour, 1, false),
		row("gone", "gpu1", 0, time.Hour, 1, false), row("gone", "gpu1", 0, time.Hour, 2, true),
		row("run", "gpu4", 0, 0, 3, false),
	})
	event := func(id, instance string, from, to time.Duration, version uint64) intake.Event {
		r := row(id, instance, from, to, version, false)
		return intake.Event{Allocation: intake.Allocation{ID: r.id, Tenant: r.tenant, Tier: r.tier, Node: r.node, Instance: r.instance,
			RequestedAt: r.requested, StartedAt: r.started, EndedAt: r.ended}, Version: version}
	}
	deletion := func(e intake.Event) intake.Event { e.Deleted = true; return e }
	for _, tc := range []struct {
		name   string
		events []intake.Event
		want   map[int][]string // refused index → what its reason names
	}{
		{"overlaps a stored allocation", []intake.Event{event("b1", "gpu0", 30*time.Minute, 2*time.Hour, 1)},
			map[int][]string{0: {`"b1" of tenant "t-b1"`, `"a1" of tenant "t-a1"`, "node-a/gpu0"}}},
		{"back to back with a stored allocation", []intake.Event{event("b1", "gpu0", time.Hour, 2*time.Hour, 1)}, nil},
		{"a newer version of itself", []intake.Event{event("a1", "gpu0", 0, 30*time.Minute, 2)}, nil},
		{"a replay of the stored version", []intake.Event{event("a1", "gpu0", 0, time.Hour, 1)}, nil},
		{"an older version", []intake.Event{event("run", "gpu0", 0, 0, 2)}, nil},
		{"the stored version saying something else", []intake.Event{event("run", "gpu0", 0, 0, 3)},
			map[int][]string{0: {`"run"`, `"a1"`}}},
		{"shortened, then followed in the same batch", []intake.Event{event("a1", "gpu0", 0, 30*time.Minute, 2), event("b1", "gpu0", 30*time.Minute, 0, 1)}, nil},
		{"moved away, then followed", []intake.Event{event("a1", "gpu5", 0, time.Hour, 2), event("b1", "gpu0", 0, time.Hour, 1)}, nil},
		{"deleted, then followed", []intake.Event{deletion(event("a1", "gpu0", 0, time.Hour, 2)), event("b1", "gpu0", 0, time.Hour, 1)}, nil},
		{"a deleted allocation holds nothing", []intake.Event{event("c1", "gpu1", 0, time.Hour, 1)}, nil},
		{"an old version of a deleted allocation", []intake.Event{event("gone", "gpu0", 0, time.Hour, 1)}, nil},
		{"a running allocation holds on", []intake.Event{event("c1", "gpu4", 5*time.Hour, 6*time.Hour, 1)},
			map[int][]string{0: {`"c1"`, `"run" of tenant "t-run" [2026-01-05T00:00:00Z, running)`}}},
		{"two events of one batch", []intake.Event{event("c1", "gpu2", 0, time.Hour, 1), event("c2", "gpu2", 10*time.Minute, 20*time.Minute, 1)},
			map[int][]string{1: {`"c2"`, `"c1"`}}},
		{"a refused event holds nothing", []intake.Event{event("b1", "gpu0", 30*time.Minute, 2*time.Hour, 1), event("b2", "gpu0", time.Hour, 2*time.Hour, 1)},
			map[int][]string{0: {`"b1"`, `"a1"`}}},
		{"a newer version that now overlaps", []intake.Event{event("c1", "gpu2", 0, time.Hour, 1), event("c2", "gpu2", time.Hour, 2*time.Hour, 1),
			event("c1", "gpu2", 0, 90*time.Minute, 2)}, map[int][]string{2: {`"c1"`, `"c2"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused, err := intake.CheckEvents(ctx, conn, tc.events)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int]string{}
			for _, r := range refused {
				got[r.Index] = r.Err.Error()
			}
			if len(got) != len(tc.want) {
				t.Fatalf("refused %v, want %d refusals: %v", got, len(tc.want), tc.want)
			}
			for i, names := range tc.want {
				for _, name := range names {
					if !strings.Contains(got[i], name) {
						t.Errorf("event %d: reason %q does not name %s", i, got[i], name)
					}
				}
			}
		})
	}
}
