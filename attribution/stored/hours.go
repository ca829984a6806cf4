package stored

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// The hourly roll-up of the stored minutes (attribution_hours, attribution_hour_hosts): the
// attribution service rolls up every whole hour a pass stored minutes of (RollupHours), and
// the readers of long windows (FromMinutesLines, HourlyLines, HeldInstances, TenantsPerHost)
// read each whole hour whose roll-up is still that of its stored minutes (freshHours) from it,
// and every other minute from attribution_minutes as before. The roll-up holds the same sums
// the readers would take of the minutes, so the figures are the same whichever is read.

// latestHourRows are the rows of attribution_hours of [from, to) of each hour's latest roll-up
// (arguments from, to, from, to), one per key (a roll-up written twice counted once).
var latestHourRows = `
    SELECT ` + tables.List(tables.AttributionHourColumns) + `
    FROM ` + tables.AttributionHours + `
    WHERE ` + chquery.HourWindow + ` AND (hour, source_ns) IN (
        SELECT hour, max(source_ns) FROM ` + tables.AttributionHours + ` WHERE ` + chquery.HourWindow + ` GROUP BY hour)
    LIMIT 1 BY hour, tenant, allocation_id, node, instance_id`

// hoursQuery is minutesQuery over the roll-ups of a range of whole hours: the same columns,
// summed per allocation.
var hoursQuery = `
SELECT tenant, allocation_id, ` + tables.MinuteSums("sum(minutes)") + `
FROM (` + latestHourRows + `
)
GROUP BY tenant, allocation_id`

// hourlyHoursQuery is hourlyQuery over the roll-ups: per hour and allocation, in hour order.
var hourlyHoursQuery = `
SELECT hour, tenant, allocation_id, ` + tables.MinuteSums("sum(minutes)") + `
FROM (` + latestHourRows + `
)
GROUP BY hour, tenant, allocation_id
ORDER BY hour, tenant, allocation_id`

// hostsHoursQuery is tenantsPerHostQuery over the roll-ups: the rows of attribution_hour_hosts
// of the roll-ups whose attribution_hours rows are read (arguments from, to, from, to).
var hostsHoursQuery = `
SELECT node, max(max_tenants)
FROM ` + tables.AttributionHosts + `
WHERE ` + chquery.HourWindow + ` AND (hour, source_ns) IN (
    SELECT hour, max(source_ns) FROM ` + tables.AttributionHours + ` WHERE ` + chquery.HourWindow + ` GROUP BY hour)
GROUP BY node`

// hourSourcesQuery is, per hour of the minutes of [from, to), its highest computed_ns and its
// number of stored minutes: what a roll-up of it must have been made from. Per minute first:
// a hash of the hour's minutes per row took 1.5 times as long over a month.
var hourSourcesQuery = `
SELECT ` + chquery.HourOf("m") + ` AS h, max(c), count()
FROM (
    SELECT minute AS m, max(computed_ns) AS c
    FROM ` + tables.AttributionMinutes + `
    WHERE ` + tables.MinuteWindow + `
    GROUP BY m
)
GROUP BY h`

// rolledSourcesQuery is, per hour of [from, to) rolled up, what its latest roll-up was made from.
var rolledSourcesQuery = `
SELECT hour, max(source_ns), argMax(source_minutes, source_ns)
FROM ` + tables.AttributionHours + `
WHERE ` + chquery.HourWindow + `
GROUP BY hour`

// HourSource is what the stored minutes of an hour were stored by: the latest pass
// (computed_ns) and the number of minutes, which a roll-up of the hour records.
type HourSource struct{ Computed, Minutes uint64 }

// HourSources is, per hour of the stored minutes of [from, to), its HourSource.
func HourSources(ctx context.Context, conn Querier, from, to time.Time) (map[int64]HourSource, error) {
	return hourSources(ctx, conn, hourSourcesQuery, from, to)
}

func hourSources(ctx context.Context, conn Querier, query string, from, to time.Time) (map[int64]HourSource, error) {
	out := map[int64]HourSource{}
	err := chquery.Each(ctx, conn, query, []any{from.Unix(), to.Unix()}, func(scan func(...any) error) error {
		var (
			h time.Time
			s HourSource
		)
		err := scan(&h, &s.Computed, &s.Minutes)
		out[h.Unix()] = s
		return err
	})
	return out, err
}

// freshHours is the set (Unix seconds) of the whole hours of [from, to) whose latest roll-up
// was made from the minutes stored now: same highest pass, same number of minutes. A pass
// stores its minutes with a later computed_ns than any before it (as tables.LatestPass
// assumes), so a recomputed or added minute makes its hour stale until it is rolled up again.
func freshHours(ctx context.Context, conn Querier, from, to time.Time) (map[int64]bool, error) {
	rolled, err := hourSources(ctx, conn, rolledSourcesQuery, from, to)
	if err != nil || len(rolled) == 0 {
		return nil, err
	}
	stored, err := hourSources(ctx, conn, hourSourcesQuery, from, to)
	if err != nil {
		return nil, err
	}
	fresh := map[int64]bool{}
	for h, r := range rolled {
		if s, ok := stored[h]; ok && s == r {
			fresh[h] = true
		}
	}
	return fresh, nil
}

// span is a part of a window: whole hours read from their roll-ups, or minutes.
type span struct {
	from, to time.Time
	hours    bool
}

// spans cuts [from, to) (whole minutes) into runs of fresh whole hours and of minutes, in
// time order.
func spans(ctx context.Context, conn Querier, from, to time.Time) ([]span, error) {
	first, last := from.Truncate(time.Hour), to.Truncate(time.Hour)
	if first.Before(from) {
		first = first.Add(time.Hour)
	}
	if !first.Before(last) {
		return []span{{from: from, to: to}}, nil
	}
	fresh, err := freshHours(ctx, conn, first, last)
	if err != nil {
		return nil, fmt.Errorf("read which hours of [%s, %s) are rolled up: %w", first.Format(time.RFC3339), last.Format(time.RFC3339), err)
	}
	var out []span
	add := func(f, t time.Time, hours bool) {
		if n := len(out); n > 0 && out[n-1].hours == hours && out[n-1].to.Equal(f) {
			out[n-1].to = t
			return
		}
		out = append(out, span{from: f, to: t, hours: hours})
	}
	if from.Before(first) {
		add(from, first, false)
	}
	for h := first; h.Before(last); h = h.Add(time.Hour) {
		add(h, h.Add(time.Hour), fresh[h.Unix()])
	}
	if last.Before(to) {
		add(last, to, false)
	}
	return out, nil
}

// chunks cuts a span into the chunks read at once, of at most minutesChunk: a day of hours is
// also what a client holds at once of an hourly stream.
func (s span) chunks() []span {
	var out []span
	for f := s.from; f.Before(s.to); f = f.Add(minutesChunk) {
		out = append(out, span{from: f, to: minTime(f.Add(minutesChunk), s.to), hours: s.hours})
	}
	return out
}

// args are the arguments of the span's queries (from, to, from, to).
func (s span) args() []any {
	f, t := s.from.Unix(), s.to.Unix()
	return []any{f, t, f, t}
}

// rollupHoursQuery sums the latest pass of each minute of an hour per allocation and target
// (arguments: the roll-up's source_ns and source_minutes, then from, to, from, to).
var rollupHoursQuery = tables.Insert(tables.AttributionHours, tables.AttributionHourColumns) + `
SELECT ` + rollupHourSums() + `
FROM (
    SELECT ` + tables.List(tables.AttributionMinuteColumns) + `
    FROM ` + tables.AttributionMinutes + `
    WHERE ` + tables.LatestPass(tables.MinuteWindow) + `
    LIMIT 1 BY minute, tenant, allocation_id
)
GROUP BY hour, tenant, allocation_id, node, instance_id`

// rollupHourSums is the select list of rollupHoursQuery, in the order of the columns of
// attribution_hours: its keys, the count of minutes and what they were stored by, and every
// other column summed as the readers sum it (tables.MinuteSum; tables' test checks that it
// sums every one).
func rollupHourSums() string {
	var out []string
	for _, c := range tables.AttributionHourColumns {
		switch sum, ok := tables.MinuteSum(c); {
		case c == "hour":
			out = append(out, chquery.HourOf("minute")+" AS hour")
		case c == "minutes":
			out = append(out, "count()")
		case c == "source_ns", c == "source_minutes":
			out = append(out, "toUInt64(?)")
		case c == "tenant", c == "allocation_id", c == "node", c == "instance_id", !ok:
			out = append(out, c) // grouped by
		default:
			out = append(out, sum)
		}
	}
	return strings.Join(out, ", ")
}

// rollupHostsQuery is, per node, the most tenants billed on it in one minute of the hour, as
// tenantsPerHostQuery counts them (arguments: source_ns, then from, to, from, to).
var rollupHostsQuery = tables.Insert(tables.AttributionHosts, tables.AttributionHostColumns) + `
SELECT ` + chquery.HourOf("minute") + ` AS hour, node, max(n), toUInt64(?)
FROM (
    SELECT node, minute, uniqExact(tenant) AS n
    FROM ` + tables.AttributionMinutes + `
    WHERE ` + tables.LatestPass(tables.MinuteWindow) + ` AND tenant != '` + report.Unallocated + `' AND billed_ns > 0
    GROUP BY node, minute
)
GROUP BY hour, node`

// RollupHours rolls up again every whole UTC hour that [from, to) touches and that has ended
// by to: the service calls it after storing a pass's minutes. An hour is rolled up from what
// is stored when it runs, its hosts first, so that an hour cut short is never read (its
// attribution_hours rows, written last, say what the roll-up was made from).
func RollupHours(ctx context.Context, conn driver.Conn, from, to time.Time) error {
	last := to.Truncate(time.Hour)
	for h := from.Truncate(time.Hour); h.Before(last); h = h.Add(time.Hour) {
		sources, err := hourSources(ctx, conn, hourSourcesQuery, h, h.Add(time.Hour))
		if err != nil {
			return fmt.Errorf("read what the minutes of the hour %s were stored by: %w", h.Format(time.RFC3339), err)
		}
		src, ok := sources[h.Unix()]
		if !ok {
			continue // nothing stored
		}
		f, t := h.Unix(), h.Add(time.Hour).Unix()
		if err := conn.Exec(ctx, rollupHostsQuery, src.Computed, f, t, f, t); err != nil {
			return fmt.Errorf("roll up the tenants per host of the hour %s: %w", h.Format(time.RFC3339), err)
		}
		if err := conn.Exec(ctx, rollupHoursQuery, src.Computed, src.Minutes, f, t, f, t); err != nil {
			return fmt.Errorf("roll up the stored minutes of the hour %s: %w", h.Format(time.RFC3339), err)
		}
	}
	return nil
}

// sumLines calls each with every allocation's sums over the span (minutesQuery's rows, or
// hoursQuery's over a span of hours).
func (s span) sumLines(ctx context.Context, conn Querier, each func(summed)) error {
	query := minutesQuery
	if s.hours {
		query = hoursQuery
	}
	return chquery.Each(ctx, conn, query, s.args(), func(scan func(...any) error) error {
		r, err := scanMinuteSums(scan)
		if err == nil {
			each(r)
		}
		return err
	})
}
