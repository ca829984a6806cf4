package eventcheck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/allocation/eventcheck"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// The ClickHouse test shares the binary's server (localtest.Database); TestMain stops it.
func TestMain(m *testing.M) { localtest.Main(m) }

type allocationRow struct {
	id, tenant, tier, node, instance string
	requested, started, ended        time.Time // ended zero: still running
	version                          uint64
	deleted                          bool
}

func insertAllocations(t *testing.T, conn driver.Conn, rows []allocationRow) {
	t.Helper()
	batch, err := conn.PrepareBatch(context.Background(), tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var deleted uint8
		if r.deleted {
			deleted = 1
		}
		err := batch.Append(r.id, r.tenant, r.tier, r.node, r.instance, allocation.ToNS(r.requested), allocation.ToNS(r.started),
			allocation.ToNS(r.ended), r.version, deleted, time.Now().UTC().Truncate(time.Second))
		if err != nil {
			t.Fatalf("append allocation %s: %v", r.id, err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("insert allocations: %v", err)
	}
}

// TestCheckEvents checks Kafka allocation events against the stored allocations and each other
// with the HTTP API's overlap rule: an overlap is refused naming both allocations; a newer
// version of an allocation never overlaps itself; replays, deletions and refused events do not
// block an instance.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
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
	event := func(id, instance string, from, to time.Duration, version uint64) allocation.Event {
		r := row(id, instance, from, to, version, false)
		return allocation.Event{Allocation: allocation.Allocation{ID: r.id, Tenant: r.tenant, Tier: r.tier, Node: r.node, Instance: r.instance,
			RequestedAt: r.requested, StartedAt: r.started, EndedAt: r.ended}, Version: version}
	}
	deletion := func(e allocation.Event) allocation.Event { e.Deleted = true; return e }
	for _, tc := range []struct {
		name    string
		events  []allocation.Event
		want    map[int][]string // refused index → what its reason names
		changes string           // the accepted changes: index:the live id before it (- for none)
	}{
		{"overlaps a stored allocation", []allocation.Event{event("b1", "gpu0", 30*time.Minute, 2*time.Hour, 1)},
			map[int][]string{0: {`"b1" of tenant "t-b1"`, `"a1" of tenant "t-a1"`, "node-a/gpu0"}}, ""},
		{"back to back with a stored allocation", []allocation.Event{event("b1", "gpu0", time.Hour, 2*time.Hour, 1)}, nil, "0:-"},
		{"a newer version of itself", []allocation.Event{event("a1", "gpu0", 0, 30*time.Minute, 2)}, nil, "0:a1"},
		{"a replay of the stored version", []allocation.Event{event("a1", "gpu0", 0, time.Hour, 1)}, nil, ""},
		{"an older version", []allocation.Event{event("run", "gpu0", 0, 0, 2)}, nil, ""},
		{"the stored version saying something else", []allocation.Event{event("run", "gpu0", 0, 0, 3)},
			map[int][]string{0: {`"run"`, `"a1"`}}, ""},
		{"shortened, then followed in the same batch", []allocation.Event{event("a1", "gpu0", 0, 30*time.Minute, 2), event("b1", "gpu0", 30*time.Minute, 0, 1)}, nil, "0:a1 1:-"},
		{"moved away, then followed", []allocation.Event{event("a1", "gpu5", 0, time.Hour, 2), event("b1", "gpu0", 0, time.Hour, 1)}, nil, "0:a1 1:-"},
		{"deleted, then followed", []allocation.Event{deletion(event("a1", "gpu0", 0, time.Hour, 2)), event("b1", "gpu0", 0, time.Hour, 1)}, nil, "0:a1 1:-"},
		{"a deleted allocation holds nothing", []allocation.Event{event("c1", "gpu1", 0, time.Hour, 1)}, nil, "0:-"},
		{"an old version of a deleted allocation", []allocation.Event{event("gone", "gpu0", 0, time.Hour, 1)}, nil, ""},
		{"a running allocation holds on", []allocation.Event{event("c1", "gpu4", 5*time.Hour, 6*time.Hour, 1)},
			map[int][]string{0: {`"c1"`, `"run" of tenant "t-run" [2026-01-05T00:00:00Z, running)`}}, ""},
		{"two events of one batch", []allocation.Event{event("c1", "gpu2", 0, time.Hour, 1), event("c2", "gpu2", 10*time.Minute, 20*time.Minute, 1)},
			map[int][]string{1: {`"c2"`, `"c1"`}}, "0:-"},
		{"a refused event holds nothing", []allocation.Event{event("b1", "gpu0", 30*time.Minute, 2*time.Hour, 1), event("b2", "gpu0", time.Hour, 2*time.Hour, 1)},
			map[int][]string{0: {`"b1"`, `"a1"`}}, "1:-"},
		{"a newer version that now overlaps", []allocation.Event{event("c1", "gpu2", 0, time.Hour, 1), event("c2", "gpu2", time.Hour, 2*time.Hour, 1),
			event("c1", "gpu2", 0, 90*time.Minute, 2)}, map[int][]string{2: {`"c1"`, `"c2"`}}, "0:- 1:-"},
		{"a deleted allocation created again", []allocation.Event{event("gone", "gpu1", 0, time.Hour, 3)}, nil, "0:-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused, changes, err := eventcheck.Check(ctx, conn, tc.events, eventcheck.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var ch []string
			for _, c := range changes {
				before := "-"
				if c.Before != nil {
					before = c.Before.ID
				}
				ch = append(ch, fmt.Sprintf("%d:%s", c.Index, before))
			}
			if got := strings.Join(ch, " "); got != tc.changes {
				t.Errorf("changes %q, want %q", got, tc.changes)
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
