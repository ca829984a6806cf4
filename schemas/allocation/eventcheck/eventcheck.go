// Package eventcheck applies the overlap rule of the HTTP API and the import to a batch of
// allocation events against what ClickHouse stores. It is apart from package allocation, whose
// types and rules are pure, so that a producer of events (the exporter's Kubernetes discovery)
// does not link the database driver.
package eventcheck

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Refusal is an event that must not be stored, and why.
type Refusal struct {
	Index int   // the event's index in the batch
	Err   error // names both allocations
}

// eventChunk bounds the ids and targets bound into one query (the arrays travel in the query
// text, which ClickHouse parses up to max_query_size, 256 KiB by default).
const eventChunk = 1000

// latestQuery: the latest version of the allocations with some ids or on some targets,
// deleted ones included (a replayed old version of a deleted allocation is not news).
var latestQuery = tables.LatestAllocations(`allocation_id IN (SELECT id FROM (SELECT ? AS ids) ARRAY JOIN ids AS id)
    OR (node, instance_id) IN (SELECT tn, ti FROM (SELECT ? AS tns, ? AS tis) ARRAY JOIN tns AS tn, tis AS ti)`)

// Options are Check's optional rules; the zero value applies the overlap rule only.
type Options struct {
	// RefuseChange, if set, refuses an event that changes a live allocation when it returns an
	// error (the collector's rule against tenant moves).
	RefuseChange func(cur, next allocation.Event) error
}

// Change is an accepted event that changes an allocation's state (not a replay or an older
// version): what the audit trail records.
type Change struct {
	Index  int                    // the event's index in the batch
	Before *allocation.Allocation // the live allocation before it; nil when none was (or it was deleted)
}

// Check applies the HTTP API's and the import's overlap rule to a batch of Kafka events,
// in the order they arrived: it returns the events that would hold an instance while another
// live allocation holds it, each with a reason naming both. Those are to be refused (not
// stored); the others may be stored as they are.
//
// Each event is checked against the latest stored state of the allocations on its instance
// and against the events before it in the batch that are not refused. A newer version of an
// allocation replaces its older one (it never overlaps itself, wherever it moves); an older
// version, or the stored one again, changes nothing and is accepted as it is (Kafka delivers at
// least once); a deletion frees the instance and is never refused. (A version equal to the
// stored one that says something else is checked like a new one: which of the two ClickHouse
// keeps is not defined.)
//
// The check and the caller's insert are not one transaction: two collectors storing
// overlapping events for different tenants (different partitions) in the same instant can both
// pass. The attribution still finds such a pair and reports it (attribution.Report.Overlaps).
//
// It also returns, in order, the accepted events that change the state, each with the live
// allocation it replaces. An event that opts.RefuseChange refuses changes nothing, so the
// events after it are checked against the state before it.
func Check(ctx context.Context, conn driver.Conn, events []allocation.Event, opts Options) ([]Refusal, []Change, error) {
	check := opts.RefuseChange
	state, err := latestOf(ctx, conn, events)
	if err != nil {
		return nil, nil, err
	}
	// live: per target, the ids of the allocations on it that are not deleted.
	live := map[string]map[string]bool{}
	hold := func(e allocation.Event) {
		if prev, ok := state[e.ID]; ok {
			delete(live[prev.Target()], e.ID)
		}
		state[e.ID] = e
		if !e.Deleted {
			if live[e.Target()] == nil {
				live[e.Target()] = map[string]bool{}
			}
			live[e.Target()][e.ID] = true
		}
	}
	for _, s := range state {
		hold(s)
	}
	var (
		refused []Refusal
		changes []Change
	)
	for i, e := range events {
		cur, ok := state[e.ID]
		if ok && (e.Version < cur.Version || e.Version == cur.Version && e.Deleted == cur.Deleted && e.Same(cur.Allocation)) {
			continue // an older version or a replay: the stored state stays what it is
		}
		if check != nil && ok && !cur.Deleted && !e.Deleted {
			if err := check(cur, e); err != nil {
				refused = append(refused, Refusal{Index: i, Err: err})
				continue
			}
		}
		if !e.Deleted {
			if err := firstOverlap(e.Allocation, live[e.Target()], state); err != nil {
				refused = append(refused, Refusal{Index: i, Err: err})
				continue
			}
		}
		c := Change{Index: i}
		if ok && !cur.Deleted {
			before := cur.Allocation
			c.Before = &before
		}
		changes = append(changes, c)
		hold(e)
	}
	return refused, changes, nil
}

// firstOverlap is the reason a may not hold its instance while one of ids does, nil when none
// does; with several, the one that starts first is named.
func firstOverlap(a allocation.Allocation, ids map[string]bool, state map[string]allocation.Event) error {
	var first *allocation.Allocation
	for id := range ids {
		b := state[id].Allocation
		if allocation.Overlapping(a, b) != nil && (first == nil || b.StartedAt.Before(first.StartedAt) || b.StartedAt.Equal(first.StartedAt) && b.ID < first.ID) {
			first = &b
		}
	}
	if first == nil {
		return nil
	}
	return allocation.Overlapping(a, *first)
}

// latestOf reads the latest stored version of the events' allocations and of every allocation
// on their targets.
func latestOf(ctx context.Context, conn driver.Conn, events []allocation.Event) (map[string]allocation.Event, error) {
	var (
		ids, nodes, instances []string
		seenID, seenTarget    = map[string]bool{}, map[string]bool{}
	)
	for _, e := range events {
		if !seenID[e.ID] {
			seenID[e.ID] = true
			ids = append(ids, e.ID)
		}
		if t := e.Target(); !seenTarget[t] {
			seenTarget[t] = true
			nodes, instances = append(nodes, e.Node), append(instances, e.Instance)
		}
	}
	state := map[string]allocation.Event{}
	for start := 0; start < max(len(ids), len(nodes)); start += eventChunk {
		if err := readLatest(ctx, conn, state, window(ids, start), window(nodes, start), window(instances, start)); err != nil {
			return nil, fmt.Errorf("read the allocations of %d events and on their %d instances: %w", len(events), len(nodes), err)
		}
	}
	return state, nil
}

// window is the chunk of list that starts at start (empty past its end).
func window(list []string, start int) []string {
	if start >= len(list) {
		return []string{}
	}
	return list[start:min(start+eventChunk, len(list))]
}

func readLatest(ctx context.Context, conn driver.Conn, state map[string]allocation.Event, ids, nodes, instances []string) error {
	rows, err := conn.Query(ctx, latestQuery, ids, nodes, instances)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			s                        allocation.Event
			requested, started, ends int64
			deleted                  uint8
		)
		if err := rows.Scan(&s.ID, &s.Tenant, &s.Tier, &s.Node, &s.Instance, &requested, &started, &ends, &s.Version, &deleted); err != nil {
			return err
		}
		s.RequestedAt, s.StartedAt, s.EndedAt = allocation.FromNS(requested), allocation.FromNS(started), allocation.FromNS(ends)
		s.Deleted = deleted == 1
		state[s.ID] = s
	}
	return rows.Err()
}
