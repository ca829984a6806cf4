package store

import (
	"context"
	"fmt"
	"time"

	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// FleetModels returns the GPU models sampled since the time, sorted.
func FleetModels(ctx context.Context, conn Querier, since time.Time) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT DISTINCT model FROM samples WHERE time >= toDateTime(?) ORDER BY model`, since.Unix())
	if err != nil {
		return nil, fmt.Errorf("read the GPU models sampled since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, fmt.Errorf("read the GPU models sampled: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// fleetTiersQuery: the tiers of the allocations (current versions, not deleted) billed at or
// after its argument (ns).
var fleetTiersQuery = `
SELECT DISTINCT cur_tier
FROM (` + tables.LatestAllocations("") + `)
WHERE cur_deleted = 0 AND cur_started_ns > 0 AND (cur_ended_ns = 0 OR cur_ended_ns > ?)
ORDER BY cur_tier`

// FleetTiers returns the tiers of the allocations billed since the time, sorted.
func FleetTiers(ctx context.Context, conn Querier, since time.Time) ([]string, error) {
	var out []string
	err := chquery.Each(ctx, conn, fleetTiersQuery, []any{since.UnixNano()}, func(scan func(...any) error) error {
		var tier string
		err := scan(&tier)
		out = append(out, tier)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the tiers of the allocations billed since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	return out, nil
}
