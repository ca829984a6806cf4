package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/allocation/eventcheck"
	"github.com/slicemeter/slicemeter/schemas/audit"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// allocationChecks are the pending allocation rows' messages and events, in the same order,
// for the overlap check: the HTTP API and the import refuse an allocation that would hold an
// instance while another one does, and so must the topic.
type allocationChecks struct {
	msgs    []kafka.Message
	events  []allocation.Event
	checked bool // refuseOverlaps ran: a retried store must not check (and dead-letter) again
	// audit: the entries of the events that change an allocation (refuseOverlaps fills it);
	// audited once they are stored, so that a retried store does not record them again.
	audit   []audit.Entry
	audited bool
}

func (a *allocationChecks) add(msg kafka.Message, e *pb.AllocationEvent) {
	a.msgs = append(a.msgs, msg)
	a.events = append(a.events, allocation.EventOf(e))
}

func (a *allocationChecks) reset() {
	clear(a.msgs) // drop references to the messages' values
	a.msgs, a.events, a.checked = a.msgs[:0], a.events[:0], false
	clear(a.audit)
	a.audit, a.audited = a.audit[:0], false
}

// refuseOverlaps checks b's allocation events against the stored allocations and each other,
// in the order they were fetched, and moves those that overlap another live allocation from
// b's rows to its dead letters (reason overlap, the detail naming both allocations). It runs
// at flush time, so that the state it checks against includes every earlier batch.
func (c *Collector) refuseOverlaps(ctx context.Context, b *batch) error {
	if b.allocs.len() == 0 || b.allocChecks.checked {
		return nil
	}
	var opts eventcheck.Options
	if !c.cfg.AllowTenantMoves {
		opts.RefuseChange = refuseTenantMove
	}
	refused, changes, err := eventcheck.Check(ctx, c.conn, b.allocChecks.events, opts)
	if err != nil {
		return fmt.Errorf("check %d allocation events for overlaps: %w", len(b.allocChecks.events), err)
	}
	drop := make(map[int]bool, len(refused))
	for _, r := range refused {
		drop[r.Index] = true
		reason := reasonOverlap
		if errors.As(r.Err, new(*tenantMoveError)) {
			reason = reasonTenantMove
		}
		c.refuseInto(b, b.allocChecks.msgs[r.Index], &refusal{reason: reason, detail: r.Err.Error()})
	}
	if len(drop) > 0 {
		b.allocs.drop(drop)
	}
	now := time.Now()
	for _, ch := range changes {
		m, e := b.allocChecks.msgs[ch.Index], b.allocChecks.events[ch.Index]
		who := actorOf(m)
		b.allocChecks.audit = append(b.allocChecks.audit, audit.NewEntry(now, who, ch.Before, e.Allocation, e.Version, e.Deleted))
	}
	b.allocChecks.checked = true
	if b.allocs.len() == 0 { // nothing to insert, and so no reset after the insert
		b.allocChecks.reset()
	}
	return nil
}

// refuseTenantMove refuses an event that moves a live allocation to another tenant: over HTTP
// only an operator may, and a Kafka message carries no principal to tell one.
func refuseTenantMove(cur, next allocation.Event) error {
	if cur.Tenant == next.Tenant {
		return nil
	}
	return &tenantMoveError{id: next.ID, from: cur.Tenant, to: next.Tenant}
}

type tenantMoveError struct{ id, from, to string }

func (e *tenantMoveError) Error() string {
	return fmt.Sprintf("allocation %q: moving it from tenant %q to %q is refused on the topic (an operator moves it over HTTP, or run the collector with --collector.allow-tenant-moves)", e.id, e.from, e.to)
}

// drop removes the rows at the given indexes.
func (c *allocationColumns) drop(rows map[int]bool) {
	keep := 0
	for i := range c.allocationID {
		if rows[i] {
			continue
		}
		c.allocationID[keep], c.tenant[keep], c.tier[keep] = c.allocationID[i], c.tenant[i], c.tier[i]
		c.node[keep], c.instanceID[keep] = c.node[i], c.instanceID[i]
		c.requestedNs[keep], c.startedNs[keep], c.endedNs[keep] = c.requestedNs[i], c.startedNs[i], c.endedNs[i]
		c.version[keep], c.deleted[keep], c.received[keep] = c.version[i], c.deleted[i], c.received[i]
		keep++
	}
	c.allocationID, c.tenant, c.tier = c.allocationID[:keep], c.tenant[:keep], c.tier[:keep]
	c.node, c.instanceID = c.node[:keep], c.instanceID[:keep]
	c.requestedNs, c.startedNs, c.endedNs = c.requestedNs[:keep], c.startedNs[:keep], c.endedNs[:keep]
	c.version, c.deleted, c.received = c.version[:keep], c.deleted[:keep], c.received[:keep]
}

// actorOf is who wrote an allocation message: door kafka, or the door and principal its
// producer names in its headers (audit.HeaderDoor: the exporter's Kubernetes discovery).
func actorOf(m kafka.Message) audit.Actor {
	who := audit.Actor{Door: audit.DoorKafka, Origin: fmt.Sprintf("%s/%d@%d", m.Topic, m.Partition, m.Offset)}
	for _, h := range m.Headers {
		switch h.Key {
		case audit.HeaderDoor:
			// Only the doors that come through the topic; another value is not believed.
			if audit.Door(h.Value) == audit.DoorKubernetes {
				who.Door = audit.DoorKubernetes
			}
		case audit.HeaderPrincipal:
			who.Principal = string(h.Value)
		}
	}
	if who.Door == audit.DoorKafka {
		who.Principal = "" // a plain Kafka message has no principal (docs/api.md, "Allocation audit")
	}
	return who
}
