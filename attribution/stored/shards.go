package stored

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// What the attribution service needs when several replicas share the fleet by node (the
// service's Shards): where each node's stored minutes end, which nodes a minute has stored,
// the nodes an allocation has been on, and a pass version later than any stored before it.

// NodeEnd is where a node's stored minutes end.
type NodeEnd struct {
	Last     time.Time // the start of its latest stored minute
	Computed time.Time // when the latest pass that stored any of its minutes ran
}

// nodeEndsQuery is, per node with a stored minute from since on (seconds), its latest minute
// and latest pass; the empty node (the markers) is every minute attributed, by any replica.
const nodeEndsQuery = `
SELECT node, max(minute), max(computed_ns), min(minute)
FROM ` + tables.AttributionMinutes + `
WHERE minute >= toDateTime(?)
GROUP BY node`

// NodeEnds is, per node with a minute stored from since on, where its stored minutes end, and
// the first minute attributed from since on (zero: none): a replica that gains nodes catches
// up from there on those behind.
func NodeEnds(ctx context.Context, conn Querier, since time.Time) (ends map[string]NodeEnd, first time.Time, err error) {
	ends = map[string]NodeEnd{}
	err = chquery.Each(ctx, conn, nodeEndsQuery, []any{since.Unix()}, func(scan func(...any) error) error {
		var (
			node        string
			last, start time.Time
			computed    uint64
		)
		if err := scan(&node, &last, &computed, &start); err != nil {
			return err
		}
		if node == "" {
			first = start.UTC()
			return nil
		}
		ends[node] = NodeEnd{Last: last.UTC(), Computed: time.Unix(0, int64(computed)).UTC()}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read where each node's stored minutes end since %s: %w", since.Format(time.RFC3339), err)
	}
	return ends, first, nil
}

// StoredNodes is, per minute of [from, to) (its start in Unix seconds), the nodes that any
// pass stored rows of: a pass that recomputes the minute must give each of its nodes a row
// (Minute.Stale), or their older rows would stay their latest pass.
func StoredNodes(ctx context.Context, conn Querier, from, to time.Time) (map[int64][]string, error) {
	out := map[int64][]string{}
	err := chquery.Each(ctx, conn, `SELECT DISTINCT minute, node FROM `+tables.AttributionMinutes+` WHERE `+tables.MinuteWindow+` AND node != ''`,
		[]any{from.Unix(), to.Unix()}, func(scan func(...any) error) error {
			var (
				m    time.Time
				node string
			)
			err := scan(&m, &node)
			out[m.Unix()] = append(out[m.Unix()], node)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("read the nodes stored in the minutes of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	for _, nodes := range out {
		slices.Sort(nodes)
	}
	return out, nil
}

// AllocationNodes is, for every allocation with a version received at or after since (whole
// seconds), the nodes of all its versions: an allocation that moved changes the minutes of the
// node it left as well as of the one it is on.
func AllocationNodes(ctx context.Context, conn Querier, since time.Time) (map[string][]string, error) {
	out := map[string][]string{}
	err := chquery.Each(ctx, conn, `
SELECT allocation_id, groupUniqArray(node)
FROM allocations
WHERE allocation_id IN (SELECT allocation_id FROM allocations WHERE received >= toDateTime(?))
GROUP BY allocation_id`, []any{since.Unix()}, func(scan func(...any) error) error {
		var (
			id    string
			nodes []string
		)
		err := scan(&id, &nodes)
		out[id] = nodes
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the nodes of the allocations received since %s: %w", since.Format(time.RFC3339), err)
	}
	return out, nil
}

// NextPass is the version (computed_ns) a pass that started at now stores the minutes of
// [from, to) with: now, or just after the latest pass stored in the hours they touch if that is
// later (another replica's pass that started after this one but stored first). A pass stored
// later then always has a later version, which the hours' roll-up needs (freshHours: a pass
// stored after a roll-up with a version no later than its source would look rolled up).
func NextPass(ctx context.Context, conn driver.Conn, from, to, now time.Time) (time.Time, error) {
	var n, last uint64
	f, t := from.Truncate(time.Hour), to.Truncate(time.Hour).Add(time.Hour)
	err := conn.QueryRow(ctx, `SELECT count(), max(computed_ns) FROM `+tables.AttributionMinutes+` WHERE `+tables.MinuteWindow,
		f.Unix(), t.Unix()).Scan(&n, &last)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the latest pass stored in [%s, %s): %w", f.Format(time.RFC3339), t.Format(time.RFC3339), err)
	}
	if n > 0 && int64(last) >= now.UnixNano() {
		return time.Unix(0, int64(last)+1).UTC(), nil
	}
	return now, nil
}
