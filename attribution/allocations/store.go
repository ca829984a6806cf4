package allocations

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// ErrRefused wraps every reason a batch of allocations was refused (overlaps, an id given twice),
// for errors.Is: the caller's input is at fault (HTTP 409/400, exit status 2).
var ErrRefused = errors.New("allocations refused")

// Result is what Put did.
type Result struct {
	Stored    []string // ids written (new or changed)
	Unchanged []string // ids whose current state was already this (a repeat)
	// Unseen are the targets (node/instance) that no sample has mentioned yet: accepted, since
	// their samples may come later, but worth a look.
	Unseen []string
}

// Store keeps allocations in ClickHouse's allocations table, one row per version.
type Store struct {
	conn driver.Conn
	now  func() time.Time
	// mu makes the read-check-write of Put atomic within this process, so that two requests
	// cannot both pass the overlap check for one instance.
	mu sync.Mutex
}

// NewStore stores allocations through conn.
func NewStore(conn driver.Conn) *Store { return &Store{conn: conn, now: time.Now} }

// currentQuery: the current state of the allocations on some targets or with some ids (the
// highest version of each id, not deleted).
var currentQuery = `
SELECT allocation_id, cur_tenant, cur_tier, cur_node, cur_instance_id, cur_requested_ns, cur_started_ns, cur_ended_ns, cur_version
FROM (
    ` + tables.LatestAllocations("") + `
)
WHERE cur_deleted = 0 AND %s
ORDER BY cur_started_ns, allocation_id`

// stored is an allocation with the version it was stored at.
type stored struct {
	allocation.Allocation
	version uint64
}

func (s *Store) query(ctx context.Context, where string, args ...any) ([]stored, error) {
	rows, err := s.conn.Query(ctx, fmt.Sprintf(currentQuery, where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var (
			a                        stored
			requested, started, ends int64
		)
		if err := rows.Scan(&a.ID, &a.Tenant, &a.Tier, &a.Node, &a.Instance, &requested, &started, &ends, &a.version); err != nil {
			return nil, err
		}
		a.RequestedAt, a.StartedAt, a.EndedAt = allocation.FromNS(requested), allocation.FromNS(started), allocation.FromNS(ends)
		out = append(out, a)
	}
	return out, rows.Err()
}

// Put stores validated allocations, all or none: it refuses the batch (ErrRefused) when an id
// appears twice in it or when two allocations would hold one instance at the same time,
// naming both. An allocation whose current state is already the same is left as it is; a
// changed one gets the next version.
func (s *Store) Put(ctx context.Context, allocs []allocation.Allocation) (Result, error) {
	var res Result
	if len(allocs) == 0 {
		return res, nil
	}
	seen := map[string]bool{}
	var ids, nodes, instances []string
	for _, a := range allocs {
		if seen[a.ID] {
			return res, fmt.Errorf("%w: allocation %q is given twice in one input", ErrRefused, a.ID)
		}
		seen[a.ID] = true
		ids = append(ids, a.ID)
		nodes = append(nodes, a.Node)
		instances = append(instances, a.Instance)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	current, err := s.query(ctx, `(allocation_id IN (SELECT id FROM (SELECT ? AS ids) ARRAY JOIN ids AS id)
        OR (cur_node, cur_instance_id) IN (SELECT tn, ti FROM (SELECT ? AS tns, ? AS tis) ARRAY JOIN tns AS tn, tis AS ti))`, ids, nodes, instances)
	if err != nil {
		return res, fmt.Errorf("read the current allocations on %d targets: %w", len(allocs), err)
	}
	var plain []allocation.Allocation
	byID := map[string]stored{}
	for _, c := range current {
		plain = append(plain, c.Allocation)
		byID[c.ID] = c
	}
	if errs := allocation.Overlaps(allocs, plain); len(errs) > 0 {
		return res, fmt.Errorf("%w: %w", ErrRefused, errors.Join(errs...))
	}
	batch, err := s.conn.PrepareBatch(ctx, tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		return res, fmt.Errorf("prepare the insert of allocations: %w", err)
	}
	received := s.now().UTC().Truncate(time.Second)
	for _, a := range allocs {
		prev, ok := byID[a.ID]
		if ok && prev.Same(a) {
			res.Unchanged = append(res.Unchanged, a.ID)
			continue
		}
		if err := batch.Append(a.ID, a.Tenant, a.Tier, a.Node, a.Instance, allocation.ToNS(a.RequestedAt), allocation.ToNS(a.StartedAt), allocation.ToNS(a.EndedAt),
			prev.version+1, uint8(0), received); err != nil {
			_ = batch.Abort()
			return res, fmt.Errorf("append allocation %q: %w", a.ID, err)
		}
		res.Stored = append(res.Stored, a.ID)
	}
	if len(res.Stored) == 0 {
		_ = batch.Abort()
	} else if err := batch.Send(); err != nil {
		return Result{}, fmt.Errorf("insert %d allocations: %w", len(res.Stored), err)
	}
	if res.Unseen, err = s.unseen(ctx, allocs); err != nil {
		return res, err
	}
	return res, nil
}

// unseen returns the targets of allocs that no sample mentions.
func (s *Store) unseen(ctx context.Context, allocs []allocation.Allocation) ([]string, error) {
	var nodes, instances []string
	for _, a := range allocs {
		nodes = append(nodes, a.Node)
		instances = append(instances, a.Instance)
	}
	rows, err := s.conn.Query(ctx, `SELECT DISTINCT node, instance_id FROM samples
        WHERE (node, instance_id) IN (SELECT tn, ti FROM (SELECT ? AS tns, ? AS tis) ARRAY JOIN tns AS tn, tis AS ti)`, nodes, instances)
	if err != nil {
		return nil, fmt.Errorf("look up the targets of %d allocations in the samples: %w", len(allocs), err)
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var node, instance string
		if err := rows.Scan(&node, &instance); err != nil {
			return nil, err
		}
		known[node+"/"+instance] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range allocs {
		if t := a.Target(); !known[t] {
			known[t] = true // once each
			out = append(out, t)
		}
	}
	return out, nil
}

// List returns the current allocations of a tenant (every tenant when tenant is empty) that
// are billed at some time in [from, to) (zero times: unbounded), by started_at.
func (s *Store) List(ctx context.Context, tenant string, from, to time.Time) ([]allocation.Allocation, error) {
	where := `(? = '' OR cur_tenant = ?) AND (? = 0 OR cur_ended_ns = 0 OR cur_ended_ns > ?) AND (? = 0 OR cur_started_ns < ?)`
	f, t := allocation.ToNS(from), allocation.ToNS(to)
	rows, err := s.query(ctx, where, tenant, tenant, f, f, t, t)
	if err != nil {
		return nil, fmt.Errorf("list the allocations of tenant %q: %w", tenant, err)
	}
	out := make([]allocation.Allocation, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Allocation)
	}
	return out, nil
}
