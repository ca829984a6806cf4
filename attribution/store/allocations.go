package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// allocationsQuery reads the current version of every allocation (tables.LatestAllocations)
// that is not deleted and is billed in [start, end): its arguments are end, start, end, start.
//
// Only the allocations with some version billed in the window are grouped: the current
// version of one billed there is such a version, so the answer is the same, and a minute does
// not group every allocation ever received (which grows with churn).
var allocationsQuery = `
SELECT allocation_id, cur_tenant, cur_tier, cur_node, cur_instance_id, cur_requested_ns, cur_started_ns, cur_ended_ns
FROM (` + tables.LatestAllocations(`allocation_id IN (
        SELECT allocation_id FROM allocations
        WHERE started_ns > 0 AND started_ns < ? AND (ended_ns = 0 OR ended_ns > ?))`) + `)
WHERE cur_deleted = 0 AND cur_started_ns > 0 AND cur_started_ns < ? AND (cur_ended_ns = 0 OR cur_ended_ns > ?)
ORDER BY allocation_id`

// ReadAllocations returns the current state of every allocation billed in the window.
func ReadAllocations(ctx context.Context, conn Querier, window billing.Interval) ([]billing.Allocation, error) {
	var out []billing.Allocation
	args := []any{window.End, window.Start, window.End, window.Start}
	err := chquery.Each(ctx, conn, allocationsQuery, args, func(scan func(...any) error) error {
		var a billing.Allocation
		err := scan(&a.ID, &a.Tenant, &a.Tier, &a.Target.Node, &a.Target.Instance, &a.Requested, &a.Started, &a.Ended)
		out = append(out, a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read allocations: %w", err)
	}
	return out, nil
}

// Received is an allocation version as the allocations table received it.
type Received struct {
	ID      string
	Version uint64
	Started time.Time
	At      time.Time // received, whole seconds
}

// ReceivedSince lists the allocation versions received at or after since (whole seconds).
func ReceivedSince(ctx context.Context, conn Querier, since time.Time) ([]Received, error) {
	rows, err := conn.Query(ctx, `SELECT allocation_id, version, started_ns, received FROM allocations WHERE received >= toDateTime(?)`, since.Unix())
	if err != nil {
		return nil, fmt.Errorf("read the allocations received since %s: %w", since.Format(time.RFC3339), err)
	}
	defer rows.Close()
	var out []Received
	for rows.Next() {
		var (
			r       Received
			started int64
		)
		if err := rows.Scan(&r.ID, &r.Version, &started, &r.At); err != nil {
			return nil, fmt.Errorf("read the allocations received since %s: %w", since.Format(time.RFC3339), err)
		}
		r.Started = billing.UTC(started)
		out = append(out, r)
	}
	return out, rows.Err()
}

// LastReceived is when the allocations table received its latest row, zero when empty.
func LastReceived(ctx context.Context, conn driver.Conn) (time.Time, error) {
	return chquery.Latest(ctx, conn, `SELECT count(), max(received) FROM allocations`, "when the latest allocation was received")
}
