// Package audit is the contract of the allocation audit trail (docs/api.md, "Allocation audit"):
// the allocation_audit table's row, how a write is recorded and how entries are read back.
// Every door that writes allocations records here, before it writes them: the HTTP API and
// `allocations import` (attribution/allocations), the Kafka topic (the collector), and later
// Kubernetes. It sits with the contracts so that both the collector and attribution use it.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit/door"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Door is the way a write came in (package door, which the exporter imports without this
// package's database code); the names below keep the audit trail's callers reading audit.Door*.
type Door = door.Door

// The doors.
const (
	DoorHTTP       = door.HTTP
	DoorImport     = door.Import
	DoorKafka      = door.Kafka
	DoorKubernetes = door.Kubernetes
)

// The headers of an allocation event that name its door and principal (door.HeaderDoor).
const (
	HeaderDoor      = door.HeaderDoor
	HeaderPrincipal = door.HeaderPrincipal
)

// Action is what a write did to the allocation.
type Action string

// The actions.
const (
	ActionCreate Action = "create" // no live allocation had the id
	ActionChange Action = "change" // a new version of a live allocation
	ActionDelete Action = "delete" // the allocation was deleted (Kafka)
)

// Actor is who made a write and from where.
type Actor struct {
	Door Door
	// Principal: the API's authenticated subject, the OS user of an import; empty for Kafka,
	// whose messages do not carry their producer's identity to a consumer.
	Principal string
	// Role: the API principal's role; "cli" for an import; empty for Kafka.
	Role string
	// Origin: the HTTP client's address; the import's host and file; the Kafka message's
	// topic/partition@offset.
	Origin string
}

// Entry is one row of the audit trail: one allocation write.
type Entry struct {
	At time.Time
	Actor
	Action       Action
	AllocationID string
	Tenant       string // after the write (before it, for a delete)
	BeforeTenant string // before the write; empty for a create
	Version      uint64 // the version written
	// Before and After are the allocation as allocation.JSON: Before empty for a create,
	// After empty for a delete.
	Before, After string
}

// NewEntry is the entry of a write by who at at: prev is the live allocation before it (nil
// when there was none), next what was written, at version.
func NewEntry(at time.Time, who Actor, prev *allocation.Allocation, next allocation.Allocation, version uint64, deleted bool) Entry {
	e := Entry{At: at, Actor: who, Action: ActionCreate, AllocationID: next.ID, Tenant: next.Tenant, Version: version}
	if prev != nil {
		e.Action, e.BeforeTenant, e.Before = ActionChange, prev.Tenant, jsonOf(*prev)
	}
	if deleted {
		e.Action = ActionDelete
		if prev != nil {
			e.Tenant = prev.Tenant
		}
		return e
	}
	e.After = jsonOf(next)
	return e
}

func jsonOf(a allocation.Allocation) string {
	b, err := json.Marshal(allocation.ToJSON(a))
	if err != nil { // strings and times only: cannot happen
		panic(fmt.Sprintf("audit: marshal allocation %q: %v", a.ID, err))
	}
	return string(b)
}

// Insert writes entries as one INSERT. Writers call it before they write the allocations, and
// do not write them when it fails: the trail may then list a write that failed afterwards,
// never miss one that was stored.
func Insert(ctx context.Context, conn driver.Conn, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	batch, err := conn.PrepareBatch(ctx, tables.Insert(tables.AllocationAudit, tables.AllocationAuditColumns))
	if err != nil {
		return fmt.Errorf("record %d allocation writes in %s: prepare the insert: %w", len(entries), tables.AllocationAudit, err)
	}
	for _, e := range entries {
		at := e.At.UTC()
		if err := batch.Append(at.Truncate(time.Second), at.UnixNano(), string(e.Door), e.Principal, e.Role, e.Origin, string(e.Action),
			e.AllocationID, e.Tenant, e.BeforeTenant, e.Version, e.Before, e.After); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("record the write of allocation %q in %s: %w", e.AllocationID, tables.AllocationAudit, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("record %d allocation writes in %s: %w", len(entries), tables.AllocationAudit, err)
	}
	return nil
}

// Query selects entries: [From, To) (zero: unbounded), one allocation id and one tenant (before
// or after the write; empty: any), at most Limit (0: no limit), oldest first.
type Query struct {
	From, To     time.Time
	AllocationID string
	Tenant       string
	Limit        int
}

// listQuery reads entries; the arguments are Query's fields, each twice ("unset or equal").
var listQuery = `SELECT at_ns, door, principal, role, origin, action, allocation_id, tenant, before_tenant, version, before, after
FROM ` + tables.AllocationAudit + `
WHERE (? = 0 OR time >= toDateTime(intDiv(?, 1000000000)) AND at_ns >= ?)
  AND (? = 0 OR time <= toDateTime(intDiv(?, 1000000000)) AND at_ns < ?)
  AND (? = '' OR allocation_id = ?)
  AND (? = '' OR tenant = ? OR before_tenant = ?)
ORDER BY at_ns, allocation_id
LIMIT ?`

// List reads the entries q selects.
func List(ctx context.Context, conn driver.Conn, q Query) ([]Entry, error) {
	var from, to int64
	if !q.From.IsZero() {
		from = q.From.UnixNano()
	}
	if !q.To.IsZero() {
		to = q.To.UnixNano()
	}
	limit := uint64(q.Limit)
	if q.Limit <= 0 {
		limit = 1 << 62
	}
	rows, err := conn.Query(ctx, listQuery, from, from, from, to, to, to, q.AllocationID, q.AllocationID, q.Tenant, q.Tenant, q.Tenant, limit)
	if err != nil {
		return nil, fmt.Errorf("read the allocation audit trail: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var (
			e            Entry
			atNs         int64
			door, action string
		)
		if err := rows.Scan(&atNs, &door, &e.Principal, &e.Role, &e.Origin, &action, &e.AllocationID, &e.Tenant, &e.BeforeTenant,
			&e.Version, &e.Before, &e.After); err != nil {
			return nil, fmt.Errorf("read the allocation audit trail: %w", err)
		}
		e.At, e.Door, e.Action = time.Unix(0, atNs).UTC(), Door(door), Action(action)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the allocation audit trail: %w", err)
	}
	return out, nil
}

// JSON is an entry on the wire (GET /api/v1/audit): before and after as JSON objects, null
// where there is none.
type JSON struct {
	Time         string          `json:"time"`
	Door         Door            `json:"door"`
	Principal    string          `json:"principal"`
	Role         string          `json:"role"`
	Origin       string          `json:"origin"`
	Action       Action          `json:"action"`
	AllocationID string          `json:"allocation_id"`
	Tenant       string          `json:"tenant"`
	BeforeTenant string          `json:"before_tenant"`
	Version      uint64          `json:"version"`
	Before       json.RawMessage `json:"before"`
	After        json.RawMessage `json:"after"`
}

// ToJSON is e's wire form.
func ToJSON(e Entry) JSON {
	raw := func(s string) json.RawMessage {
		if s == "" {
			return json.RawMessage("null")
		}
		return json.RawMessage(s)
	}
	return JSON{Time: e.At.UTC().Format(time.RFC3339Nano), Door: e.Door, Principal: e.Principal, Role: e.Role, Origin: e.Origin,
		Action: e.Action, AllocationID: e.AllocationID, Tenant: e.Tenant, BeforeTenant: e.BeforeTenant, Version: e.Version,
		Before: raw(e.Before), After: raw(e.After)}
}
