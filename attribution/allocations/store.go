package allocations

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/user"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit"
	"github.com/slicemeter/slicemeter/schemas/tables"
	"github.com/slicemeter/slicemeter/schemas/validate"
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
	// lookupBytes bounds the names one lookup query carries, and insertRows the rows of one
	// insert (defaults; tests make them tiny to see the chunking).
	lookupBytes, insertRows int
}

// lookupBytes: ids and targets are bound into the query text, which ClickHouse refuses
// beyond max_query_size (256 KiB by default: 10,000 allocations did not fit); half of it
// leaves room for the quoting and the query itself.
const defaultLookupBytes = 128 << 10

// defaultInsertRows is the rows of one INSERT: one native block, which ClickHouse writes as one
// part of the (unpartitioned) allocations table, all or nothing. The 100,000 allocations a
// request or file may carry fit in one; a larger input is written in several (see Put).
const defaultInsertRows = 100_000

// NewStore stores allocations through conn.
func NewStore(conn driver.Conn) *Store {
	return &Store{conn: conn, now: time.Now, lookupBytes: defaultLookupBytes, insertRows: defaultInsertRows}
}

// currentQuery: the current state of the allocations on some targets or with some ids (the
// highest version of each id; deleted ones only where the third %s is 1). The first %s
// filters the rows before grouping (by id: uses the table's order), the second the current states.
var currentQuery = `
SELECT allocation_id, cur_tenant, cur_tier, cur_node, cur_instance_id, cur_requested_ns, cur_started_ns, cur_ended_ns, cur_version, cur_deleted
FROM (
    %s
)
WHERE (cur_deleted = 0 OR %d = 1) AND %s
ORDER BY cur_started_ns, allocation_id`

// stored is an allocation with the version it was stored at.
type stored struct {
	allocation.Allocation
	version uint64
	deleted bool // its latest version deletes it: only its version counts
}

func (s *Store) query(ctx context.Context, before, where string, args ...any) ([]stored, error) {
	return s.queryDeleted(ctx, false, before, where, args...)
}

// queryDeleted is query that, with withDeleted, also returns the allocations whose latest
// version deletes them.
func (s *Store) queryDeleted(ctx context.Context, withDeleted bool, before, where string, args ...any) ([]stored, error) {
	flag := 0
	if withDeleted {
		flag = 1
	}
	rows, err := s.conn.Query(ctx, fmt.Sprintf(currentQuery, tables.LatestAllocations(before), flag, where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var (
			a                        stored
			requested, started, ends int64
			deleted                  uint8
		)
		if err := rows.Scan(&a.ID, &a.Tenant, &a.Tier, &a.Node, &a.Instance, &requested, &started, &ends, &a.version, &deleted); err != nil {
			return nil, err
		}
		a.deleted = deleted != 0
		a.RequestedAt, a.StartedAt, a.EndedAt = allocation.FromNS(requested), allocation.FromNS(started), allocation.FromNS(ends)
		out = append(out, a)
	}
	return out, rows.Err()
}

// Put stores validated allocations, all or none: it refuses the batch (ErrRefused) when an id
// appears twice in it or when two allocations would hold one instance at the same time,
// naming the first such pair. An allocation whose current state is already the same is left
// as it is; a changed one gets the next version.
//
// Everything is read and checked before the first row is written. The rows are then written
// in inserts of up to 100,000 (one part each, all or nothing). ClickHouse has no transactions
// across inserts: when a larger input fails midway, the inserts before the failure stay, but
// as versions like any other: Put again with the same input (a retry) finds those unchanged,
// writes the rest and so ends where one successful Put would have; a corrected input gets
// the next versions, which supersede them.
//
// Every allocation written is recorded first in the audit trail (schemas/audit) as by who: an
// insert's entries go in before its rows, and when they cannot be written, neither are the
// rows (Put fails). A retry after a failed insert may so record that insert's writes twice;
// no stored write goes unrecorded.
func (s *Store) Put(ctx context.Context, who audit.Actor, allocs []allocation.Allocation) (Result, error) {
	return s.PutChecked(ctx, who, allocs, nil)
}

// Check is asked, before anything is written, about every allocation of a Put that changes
// one already stored (prev, its current state); an error refuses the whole input with it.
type Check func(prev, next allocation.Allocation) error

// PutChecked is Put that refuses the input if check (when not nil) refuses one of its changes:
// the API's rule that only an operator moves an allocation to another tenant.
func (s *Store) PutChecked(ctx context.Context, who audit.Actor, allocs []allocation.Allocation, check Check) (Result, error) {
	var res Result
	if len(allocs) == 0 {
		return res, nil
	}
	seen := make(map[string]int, len(allocs))
	for i, a := range allocs {
		if first, ok := seen[a.ID]; ok {
			return res, fmt.Errorf("%w: %w", ErrRefused, &allocation.Conflict{Index: i,
				Err: fmt.Errorf("allocation %q is given twice in one input (first as allocation %d)", a.ID, first+1)})
		}
		seen[a.ID] = i
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	current, err := s.current(ctx, allocs)
	if err != nil {
		return res, err
	}
	plain := make([]allocation.Allocation, 0, len(current))
	byID := make(map[string]stored, len(current))
	for _, c := range current {
		if !c.deleted {
			plain = append(plain, c.Allocation)
		}
		byID[c.ID] = c
	}
	if err := allocation.FirstOverlap(allocs, plain); err != nil {
		return res, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	var (
		changed []stored
		entries []audit.Entry
	)
	now := s.now().UTC()
	for i, a := range allocs {
		prev, found := byID[a.ID]
		// An id deleted (through Kafka) and given again is created anew, at a version above
		// the deletion's: below it, the deletion would stay the latest and hide it.
		ok := found && !prev.deleted
		if ok && prev.Same(a) {
			res.Unchanged = append(res.Unchanged, a.ID)
			continue
		}
		if ok && check != nil {
			if err := check(prev.Allocation, a); err != nil {
				return Result{}, err
			}
		}
		if found && prev.version == math.MaxUint64 {
			// The next version would wrap to 0, below the stored one: ClickHouse would keep the
			// old state while this answered "stored". (The doors refuse versions above
			// validate.MaxAllocationVersion; this one was stored before they did.)
			return Result{}, fmt.Errorf("%w: %w", ErrRefused, &allocation.Conflict{Index: i,
				Err: fmt.Errorf("allocation %q is stored at version %d, the highest the allocations table orders: no change can be ordered after it (expected a version up to %d; correct its rows in ClickHouse)",
					a.ID, prev.version, uint64(validate.MaxAllocationVersion))})
		}
		var before *allocation.Allocation
		if ok {
			before = &prev.Allocation
		}
		changed = append(changed, stored{Allocation: a, version: prev.version + 1})
		entries = append(entries, audit.NewEntry(now, who, before, a, prev.version+1, false))
	}
	received := now.Truncate(time.Second)
	for from := 0; from < len(changed); from += s.insertRows {
		part := changed[from:min(from+s.insertRows, len(changed))]
		if err := audit.Insert(ctx, s.conn, entries[from:from+len(part)]); err != nil {
			return Result{}, fmt.Errorf("allocations %d to %d of the %d changed not written (%d written before; the same input again completes it): %w",
				from+1, from+len(part), len(changed), from, err)
		}
		if err := s.insert(ctx, part, received); err != nil {
			return Result{}, fmt.Errorf("insert allocations %d to %d of the %d changed (%d written before; the same input again completes it): %w",
				from+1, from+len(part), len(changed), from, err)
		}
	}
	for _, c := range changed {
		res.Stored = append(res.Stored, c.ID)
	}
	if res.Unseen, err = s.unseen(ctx, allocs); err != nil {
		return res, err
	}
	return res, nil
}

// current is the current state of the allocations with the ids of allocs or on their
// targets, by started_at and id, read in queries that each fit in max_query_size.
func (s *Store) current(ctx context.Context, allocs []allocation.Allocation) ([]stored, error) {
	ids := make([]string, len(allocs))
	for i, a := range allocs {
		ids[i] = a.ID
	}
	nodes, instances := targets(allocs)
	byID := map[string]stored{}
	keep := func(rows []stored) {
		for _, r := range rows {
			byID[r.ID] = r
		}
	}
	for _, c := range chunks(ids, nil, s.lookupBytes) {
		rows, err := s.queryDeleted(ctx, true, "allocation_id IN (SELECT id FROM (SELECT ? AS ids) ARRAY JOIN ids AS id)", "1", ids[c.from:c.to])
		if err != nil {
			return nil, fmt.Errorf("read the current allocations with ids %d to %d of %d: %w", c.from+1, c.to, len(ids), err)
		}
		keep(rows)
	}
	for _, c := range chunks(nodes, instances, s.lookupBytes) {
		rows, err := s.query(ctx, "", "(cur_node, cur_instance_id) IN (SELECT tn, ti FROM (SELECT ? AS tns, ? AS tis) ARRAY JOIN tns AS tn, tis AS ti)",
			nodes[c.from:c.to], instances[c.from:c.to])
		if err != nil {
			return nil, fmt.Errorf("read the current allocations on targets %d to %d of %d: %w", c.from+1, c.to, len(nodes), err)
		}
		keep(rows)
	}
	out := slices.Collect(maps.Values(byID))
	// The order one query gave: the overlap check names the first conflict in it.
	slices.SortFunc(out, func(a, b stored) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// insert writes rows as one INSERT.
func (s *Store) insert(ctx context.Context, rows []stored, received time.Time) error {
	batch, err := s.conn.PrepareBatch(ctx, tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		return fmt.Errorf("prepare the insert: %w", err)
	}
	for _, a := range rows {
		if err := batch.Append(a.ID, a.Tenant, a.Tier, a.Node, a.Instance, allocation.ToNS(a.RequestedAt), allocation.ToNS(a.StartedAt), allocation.ToNS(a.EndedAt),
			a.version, uint8(0), received); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("append allocation %q: %w", a.ID, err)
		}
	}
	return batch.Send()
}

// targets are the distinct targets of allocs, as nodes and instances, in first-seen order:
// 100,000 allocations are often on a few hundred instances.
func targets(allocs []allocation.Allocation) (nodes, instances []string) {
	seen := map[[2]string]bool{}
	for _, a := range allocs {
		if t := [2]string{a.Node, a.Instance}; !seen[t] {
			seen[t] = true
			nodes, instances = append(nodes, a.Node), append(instances, a.Instance)
		}
	}
	return nodes, instances
}

// span is the half-open range [from, to) of a list.
type span struct{ from, to int }

// chunks splits the names of a and b (b: nil, or as long as a, bound alongside) into spans
// whose names come to at most maxBytes, counting each name's quotes and separator; every
// span has at least one entry, so a name longer than maxBytes gets a query of its own.
func chunks(a, b []string, maxBytes int) []span {
	var out []span
	from, size := 0, 0
	for i := range a {
		n := len(a[i]) + 4
		if b != nil {
			n += len(b[i]) + 4
		}
		if i > from && size+n > maxBytes {
			out = append(out, span{from, i})
			from, size = i, 0
		}
		size += n
	}
	if from < len(a) {
		out = append(out, span{from, len(a)})
	}
	return out
}

// unseen returns the targets of allocs that no sample mentions.
func (s *Store) unseen(ctx context.Context, allocs []allocation.Allocation) ([]string, error) {
	nodes, instances := targets(allocs)
	known := map[string]bool{}
	for _, c := range chunks(nodes, instances, s.lookupBytes) {
		if err := s.sampled(ctx, nodes[c.from:c.to], instances[c.from:c.to], known); err != nil {
			return nil, fmt.Errorf("look up targets %d to %d of %d in the samples: %w", c.from+1, c.to, len(nodes), err)
		}
	}
	var out []string
	for i := range nodes {
		if t := nodes[i] + "/" + instances[i]; !known[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// sampled adds to known the targets (node/instance) among nodes and instances that a sample mentions.
func (s *Store) sampled(ctx context.Context, nodes, instances []string, known map[string]bool) error {
	rows, err := s.conn.Query(ctx, `SELECT DISTINCT node, instance_id FROM samples
        WHERE (node, instance_id) IN (SELECT tn, ti FROM (SELECT ? AS tns, ? AS tis) ARRAY JOIN tns AS tn, tis AS ti)`, nodes, instances)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var node, instance string
		if err := rows.Scan(&node, &instance); err != nil {
			return err
		}
		known[node+"/"+instance] = true
	}
	return rows.Err()
}

// List returns the current allocations of a tenant (every tenant when tenant is empty) that
// are billed at some time in [from, to) (zero times: unbounded), by started_at.
func (s *Store) List(ctx context.Context, tenant string, from, to time.Time) ([]allocation.Allocation, error) {
	where := `(? = '' OR cur_tenant = ?) AND (? = 0 OR cur_ended_ns = 0 OR cur_ended_ns > ?) AND (? = 0 OR cur_started_ns < ?)`
	f, t := allocation.ToNS(from), allocation.ToNS(to)
	rows, err := s.query(ctx, "", where, tenant, tenant, f, f, t, t)
	if err != nil {
		return nil, fmt.Errorf("list the allocations of tenant %q: %w", tenant, err)
	}
	out := make([]allocation.Allocation, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Allocation)
	}
	return out, nil
}

// ImportActor is who `slicemeter allocations import FILE` writes as: the OS user (role cli),
// from this host and file. The user is what the OS says, not authenticated by slicemeter: the
// import needs the database's credentials, which are what admits it.
func ImportActor(file string) audit.Actor {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	} else if env := os.Getenv("USER"); env != "" {
		name = env
	}
	host, _ := os.Hostname()
	return audit.Actor{Door: audit.DoorImport, Principal: name, Role: "cli", Origin: host + ":" + file}
}
