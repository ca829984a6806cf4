package store

import (
	"context"
	"fmt"
	"time"
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
