package attribution

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Querier is the part of a ClickHouse connection that reading needs.
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
}

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
