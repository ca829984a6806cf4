package stored

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/attribution/report"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Both sides of attribution_minutes (tenant × allocation × minute, one row set per pass):
// the attribution service writes every closed minute it attributes (WriteMinutes), reports
// sum them back (FromMinutes).

// minutesQuery sums, per allocation, the stored minutes of [from, to) as the service last
// attributed each (tables.LatestPass; its arguments from, to, from, to). The inner query's
// aliases are the columns' names, so that the outer one sums them with tables' formulas.
// Every column is a sum, a maximum or the same in every row, so that the sums of consecutive
// chunks of a window add up to the window's (FromMinutes reads a long window by chunks). node
// is grouped by, not aliased: an alias named node would replace the column in LatestPass.
var minutesQuery = `
SELECT tenant, allocation_id, ` + tables.MinuteSums("uniqExact(minute)") + `
FROM (
    SELECT minute, tenant, allocation_id, node, ` + anyOfEach(tables.MinuteSumColumns(), "node") + `
    FROM ` + tables.AttributionMinutes + `
    WHERE ` + tables.LatestPass(tables.MinuteWindow) + `
    GROUP BY minute, tenant, allocation_id, node
)
GROUP BY tenant, allocation_id`

// anyOfEach is "any(c) AS c" of each of columns but except, for a query whose groups hold
// copies of one row.
func anyOfEach(columns []string, except string) string {
	var out []string
	for _, c := range columns {
		if c != except {
			out = append(out, "any("+c+") AS "+c)
		}
	}
	return strings.Join(out, ", ")
}

// ErrNotAttributed is what a report from stored minutes wraps when some of its minutes are
// not stored yet: it can be asked again later (the API answers 409).
var ErrNotAttributed = errors.New("not attributed yet")

// FromMinutes is the report of [from, to), whole minutes, built from the minutes the
// attribution service stored (table attribution_minutes) instead of from the samples: money
// and seconds are sums of the minutes, efficiency their mean weighted by measured time
// (tables.Efficiency: minutes without a measured sample do not count), jitter the
// p99 of their summed wait histograms, cold start the largest known. It equals Compute's
// report of the window (within float rounding) once every minute of it is attributed, and
// fails naming how many are not.
func FromMinutes(ctx context.Context, conn Querier, from, to time.Time) (report.Report, error) {
	rep, _, err := FromMinutesLines(ctx, conn, from, to)
	return rep, err
}

// FromMinutesLines is FromMinutes with the allocations' lines of the window, which its
// tenant rows sum.
func FromMinutesLines(ctx context.Context, conn Querier, from, to time.Time) (report.Report, []billing.Line, error) {
	if !from.Before(to) || !from.Equal(from.Truncate(time.Minute)) || !to.Equal(to.Truncate(time.Minute)) {
		return report.Report{}, nil, fmt.Errorf("report window [%s, %s) from stored minutes: expected whole minutes, start before end",
			from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	window := billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}
	var (
		byAllocation = map[[2]string]*minuteSums{}
		order        [][2]string
		currency     string
		unallocated  decimal.Decimal
		minutes      uint64
	)
	// Whole hours from their roll-ups where fresh (spans), the rest by chunks of minutes of at
	// most a day: the latest-pass GROUP BY per minute and allocation of a month of a large
	// fleet would need more memory than a server gives one query; the parts' sums add up
	// (money as exact Decimal sums), and the charges come from the window's sums.
	parts, err := spans(ctx, conn, from, to)
	if err != nil {
		return report.Report{}, nil, err
	}
	for _, sp := range parts {
		for _, c := range sp.chunks() {
			if err := c.sumLines(ctx, conn, func(r summed) {
				currency = r.currency
				if r.tenant == report.Unallocated {
					unallocated = unallocated.Add(r.sums.listCost)
					if r.id == "" { // the marker rows: one a minute attributed
						minutes += r.minutes
					}
					return
				}
				k := [2]string{r.tenant, r.id}
				sum := byAllocation[k]
				if sum == nil {
					sum = r.first()
					byAllocation[k] = sum
					order = append(order, k)
				}
				sum.add(r.sums, r.waits, r.counts)
				sum.fraction = max(sum.fraction, r.sums.fraction)
			}); err != nil {
				return report.Report{}, nil, fmt.Errorf("read the stored minutes of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
			}
		}
	}
	if want := uint64(to.Sub(from) / time.Minute); minutes != want {
		return report.Report{}, nil, fmt.Errorf("report [%s, %s) from stored minutes: %d of its %d minutes are %w",
			from.Format(time.RFC3339), to.Format(time.RFC3339), want-minutes, want, ErrNotAttributed)
	}
	lines := make([]billing.Line, 0, len(order))
	for _, k := range order {
		lines = append(lines, byAllocation[k].line(k[0], k[1]))
	}
	rows, notes := billing.TenantRows(lines, window, currency)
	capacity := unallocated.InexactFloat64()
	for _, row := range rows {
		capacity += row.ListCost
	}
	return report.Report{
		WindowStart: from.UTC(), WindowEnd: to.UTC(), Currency: currency, Tenants: rows,
		UnallocatedListCost: unallocated.InexactFloat64(), CapacityListCost: capacity, Notes: notes,
	}, lines, nil
}

// summed is one row of minutesQuery: an allocation's sums over the minutes of a chunk.
type summed struct {
	tenant, id, currency string
	sums                 minuteSums // with the allocation's facts (tier, model, …)
	waits, counts        []uint64
	minutes              uint64
}

// first is the sums an allocation starts from: its facts, nothing summed yet.
func (r summed) first() *minuteSums {
	s := r.sums
	return &minuteSums{tier: s.tier, requested: s.requested, started: s.started, sla: s.sla, coldStart: -1, waits: billing.Histogram{},
		model: s.model, profile: s.profile, node: s.node, instance: s.instance}
}

// scanMinuteSums reads a row of minutesQuery's columns, after lead (the columns before them).
func scanMinuteSums(scan func(...any) error, lead ...any) (summed, error) {
	var (
		r      summed
		x      minuteSums
		sliced uint8
		waste  decimal.Decimal
	)
	err := scan(append(lead, &r.tenant, &r.id, &x.tier, &x.requested, &x.started, &sliced,
		&x.billed, &x.metered, &x.active, &x.listCost, &x.cost, &waste, &x.overheadCost, &x.efficiencyNS, &x.coldStart, &x.sla, &r.currency,
		&r.waits, &r.counts, &r.minutes, &x.overheadNS, &x.model, &x.profile, &x.fraction, &x.node, &x.instance,
		&x.memUsedNS, &x.memNS, &x.energyJ)...)
	x.sliced = sliced == 1
	r.sums = x
	return r, err
}

// minutesChunk is the longest window FromMinutes reads at once.
const minutesChunk = 24 * time.Hour

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// minuteSums is one allocation's sums over the chunks of a window of stored minutes.
type minuteSums struct {
	tier, model, profile, node, instance string
	fraction                             float64
	requested, started, sla              int64
	billed, metered, active, coldStart   int64
	sliced                               bool
	listCost, cost, overheadCost         decimal.Decimal
	efficiencyNS, overheadNS             float64
	memUsedNS, memNS, energyJ            float64
	waits                                billing.Histogram
}

func (s *minuteSums) add(x minuteSums, waits, counts []uint64) {
	s.billed, s.metered, s.active = s.billed+x.billed, s.metered+x.metered, s.active+x.active
	s.listCost, s.cost, s.overheadCost = s.listCost.Add(x.listCost), s.cost.Add(x.cost), s.overheadCost.Add(x.overheadCost)
	s.efficiencyNS, s.overheadNS = s.efficiencyNS+x.efficiencyNS, s.overheadNS+x.overheadNS
	s.memUsedNS, s.memNS, s.energyJ = s.memUsedNS+x.memUsedNS, s.memNS+x.memNS, s.energyJ+x.energyJ
	s.coldStart, s.sliced = max(s.coldStart, x.coldStart), s.sliced || x.sliced
	for i, w := range waits {
		if i < len(counts) {
			s.waits[w] += counts[i]
		}
	}
}

// line is the allocation's line of the window: its charges from the window's sums, as
// Compute does, not the sum of the minutes'.
func (s *minuteSums) line(tenant, id string) billing.Line {
	l := billing.Line{Tenant: tenant, AllocationID: id, Tier: s.tier, Model: s.model, Profile: s.profile, Fraction: s.fraction,
		Node: s.node, Instance: s.instance,
		Requested: billing.UTC(s.requested), Started: billing.UTC(s.started),
		Billed: time.Duration(s.billed), Metered: time.Duration(s.metered), Active: time.Duration(s.active),
		ListCost: s.listCost.InexactFloat64(), Cost: s.cost.InexactFloat64(),
		TimeSliced: s.sliced, ColdStartSLA: time.Duration(s.sla),
		// As tables.Efficiency sums them: Σ efficiency_ns over Σ active_ns. The stored
		// efficiency_ns are each minute's efficiency (within 0..1) × its active ns, so their
		// mean is within 0..1 too, and the clamp of TimeMean changes nothing here.
		Efficiency: billing.TimeMean(s.efficiencyNS, time.Duration(s.active)),
		MemUsedNS:  s.memUsedNS, MemNS: s.memNS, EnergyJ: s.energyJ,
	}
	l.Overhead = overheadOf(s.overheadNS, l.Metered, s.overheadCost.InexactFloat64(), l.Cost)
	l.WasteCost, l.OverheadCost = billing.Charges(l.Cost, l.Overhead, l.Efficiency, l.Active, l.Billed)
	// The kind is not stored: a whole GPU has no profile, a vGPU is time-sliced.
	switch {
	case s.profile == "" && s.model != "":
		l.Kind = pb.Kind_KIND_GPU.Label()
	case s.sliced:
		l.Kind = pb.Kind_KIND_VGPU.Label()
	case s.profile != "":
		l.Kind = pb.Kind_KIND_MIG.Label()
	}
	if s.coldStart >= 0 {
		d := time.Duration(s.coldStart)
		l.ColdStart = &d
	}
	l.Waits = s.waits
	return l
}

// overheadOf is a window's overhead fraction from its minutes: Σ overhead_ns / Σ metered_ns,
// time-averaged over the metered time as from the samples; without metered time (a fixed MIG
// overhead then) that of the cost.
func overheadOf(overheadNS float64, metered time.Duration, overheadCost, cost float64) float64 {
	switch {
	case metered > 0:
		return billing.TimeMean(overheadNS, metered)
	case cost > 0:
		return overheadCost / cost
	}
	return 0
}

// Minute is one attributed minute: the window's report and its allocations' lines.
type Minute struct {
	Start  time.Time
	Report report.Report
	Lines  []billing.Line
	// Stale are nodes stored in an earlier pass of the minute that have neither capacity nor
	// a line now (an allocation moved away): each gets a zero __unallocated__ row, so that
	// this pass is their latest (tables.LatestPass) and their old rows no longer count.
	Stale []string
}

var insertMinutes = tables.Insert(tables.AttributionMinutes, tables.AttributionMinuteColumns)

// minuteRow is a row of attribution_minutes in the order of tables.AttributionMinuteColumns,
// from its values by column name: values land in their columns whatever the order, and a
// column without a value, or a value without a column, is an error.
func minuteRow(values map[string]any) ([]any, error) {
	row := make([]any, len(tables.AttributionMinuteColumns))
	for i, c := range tables.AttributionMinuteColumns {
		v, ok := values[c]
		if !ok {
			return nil, fmt.Errorf("no value for column %s of %s", c, tables.AttributionMinutes)
		}
		row[i] = v
	}
	if len(values) != len(row) {
		return nil, fmt.Errorf("%d values for the %d columns of %s", len(values), len(row), tables.AttributionMinutes)
	}
	return row, nil
}

// MoneyScale is the number of decimal places of the money columns (Decimal(38, 12)).
const MoneyScale = 12

// Money is an amount as the money columns store it: rounded to MoneyScale places. It fails
// on NaN and ±Inf, which no Decimal can hold (and no bill should).
func Money(f float64) (decimal.Decimal, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return decimal.Decimal{}, fmt.Errorf("amount %v is not a finite number", f)
	}
	return decimal.NewFromFloat(f).Round(MoneyScale), nil
}

// moneyValues are the money columns of a line as Decimals, by column name.
func moneyValues(listCost, cost, waste, overhead float64) (map[string]any, error) {
	out := map[string]any{}
	for _, c := range []struct {
		name string
		v    float64
	}{{"list_cost", listCost}, {"cost", cost}, {"waste_cost", waste}, {"overhead_cost", overhead}} {
		d, err := Money(c.v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		out[c.name] = d
	}
	return out, nil
}

// withValues is values with more's added.
func withValues(values, more map[string]any) map[string]any {
	for k, v := range more {
		values[k] = v
	}
	return values
}

// WriteMinutes stores the minutes as one pass (computed_ns), in one batch.
func WriteMinutes(ctx context.Context, conn driver.Conn, minutes []Minute, computed time.Time) error {
	batch, err := conn.PrepareBatch(ctx, insertMinutes)
	if err != nil {
		return fmt.Errorf("prepare the insert of attributed minutes: %w", err)
	}
	version := uint64(computed.UnixNano())
	for _, m := range minutes {
		for _, l := range m.Lines {
			coldStart := int64(-1)
			if l.ColdStart != nil {
				coldStart = int64(*l.ColdStart)
			}
			var sliced uint8
			if l.TimeSliced {
				sliced = 1
			}
			waits, counts := []uint64{}, []uint64{}
			for _, w := range slices.Sorted(maps.Keys(l.Waits)) { // in order: the same minute, the same row
				waits, counts = append(waits, w), append(counts, l.Waits[w])
			}
			money, err := moneyValues(l.ListCost, l.Cost, l.WasteCost, l.OverheadCost)
			if err != nil {
				_ = batch.Abort()
				return fmt.Errorf("minute %s of allocation %s: %w", m.Start.Format(time.RFC3339), l.AllocationID, err)
			}
			row, err := minuteRow(withValues(map[string]any{
				"minute": m.Start, "tenant": l.Tenant, "allocation_id": l.AllocationID, "tier": l.Tier, "node": l.Node,
				"instance_id": l.Instance, "requested_ns": l.Requested.UnixNano(), "started_ns": l.Started.UnixNano(),
				"sliced": sliced, "billed_ns": int64(l.Billed), "metered_ns": int64(l.Metered), "active_ns": int64(l.Active),
				"efficiency_ns": l.Efficiency * float64(l.Active), "cold_start_ns": coldStart,
				"cold_start_sla_ns": int64(l.ColdStartSLA), "wait_ns": waits, "wait_count": counts,
				"currency": m.Report.Currency, "computed_ns": version, "overhead_ns": l.Overhead * float64(l.Metered),
				"model": l.Model, "profile": l.Profile, "fraction": l.Fraction,
				"mem_used_ns": l.MemUsedNS, "mem_ns": l.MemNS, "energy_j": l.EnergyJ,
			}, money))
			if err == nil {
				err = batch.Append(row...)
			}
			if err != nil {
				_ = batch.Abort()
				return fmt.Errorf("append minute %s of allocation %s: %w", m.Start.Format(time.RFC3339), l.AllocationID, err)
			}
		}
		if err := appendUnallocated(batch, m, version); err != nil {
			_ = batch.Abort()
			return err
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d attributed minutes: %w", len(minutes), err)
	}
	return nil
}

// appendUnallocated appends the minute's __unallocated__ rows: one per node of
// Report.UnallocatedByNode and of Stale (allocation_id the node, as the table's key has no
// node), and the marker row (empty node and allocation_id), written even when no node is there:
// the minute is then known to be attributed. Without UnallocatedByNode (a report not computed
// from the samples) the marker holds the whole unallocated list cost.
func appendUnallocated(batch driver.Batch, m Minute, version uint64) error {
	byNode := map[string]float64{}
	for _, n := range m.Stale {
		byNode[n] = 0
	}
	for n, v := range m.Report.UnallocatedByNode {
		byNode[n] = v
	}
	marker := m.Report.UnallocatedListCost
	if m.Report.UnallocatedByNode != nil {
		marker = byNode[""] // a node without a name has no row of its own
		delete(byNode, "")
	}
	nodes := slices.Sorted(maps.Keys(byNode))
	for i, n := range append(nodes, "") {
		listCost := marker
		if i < len(nodes) {
			listCost = byNode[n]
		}
		money, err := moneyValues(listCost, 0, 0, 0)
		if err != nil {
			return fmt.Errorf("minute %s of the unallocated capacity of node %q: %w", m.Start.Format(time.RFC3339), n, err)
		}
		row, err := minuteRow(withValues(map[string]any{
			"minute": m.Start, "tenant": report.Unallocated, "allocation_id": n, "tier": "", "node": n, "instance_id": "",
			"requested_ns": int64(0), "started_ns": int64(0), "sliced": uint8(0), "billed_ns": int64(0),
			"metered_ns": int64(0), "active_ns": int64(0), "efficiency_ns": 0., "cold_start_ns": int64(-1),
			"cold_start_sla_ns": int64(0), "wait_ns": []uint64{}, "wait_count": []uint64{},
			"currency": m.Report.Currency, "computed_ns": version, "overhead_ns": 0.,
			"model": "", "profile": "", "fraction": 0., "mem_used_ns": 0., "mem_ns": 0., "energy_j": 0.,
		}, money))
		if err == nil {
			err = batch.Append(row...)
		}
		if err != nil {
			return fmt.Errorf("append minute %s of the unallocated capacity of node %q: %w", m.Start.Format(time.RFC3339), n, err)
		}
	}
	return nil
}

// LastMinute is the start of the latest minute stored, zero when none.
func LastMinute(ctx context.Context, conn driver.Conn) (time.Time, error) {
	return chquery.Latest(ctx, conn, `SELECT count(), max(minute) FROM attribution_minutes`, "the latest attributed minute")
}

// LastComputed is when the latest stored pass ran, zero when none.
func LastComputed(ctx context.Context, conn driver.Conn) (time.Time, error) {
	var n, last uint64
	if err := conn.QueryRow(ctx, `SELECT count(), max(computed_ns) FROM attribution_minutes`).Scan(&n, &last); err != nil {
		return time.Time{}, fmt.Errorf("read when the latest minutes were stored: %w", err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, int64(last)).UTC(), nil
}

// LastPassIn is when the latest pass stored any minute of [from, to) ran, zero when none: a
// report from the stored minutes of the window is the same as long as it does not move.
func LastPassIn(ctx context.Context, conn driver.Conn, from, to time.Time) (time.Time, error) {
	var n, last uint64
	err := conn.QueryRow(ctx, `SELECT count(), max(computed_ns) FROM `+tables.AttributionMinutes+` WHERE `+tables.MinuteWindow,
		from.Unix(), to.Unix()).Scan(&n, &last)
	if err != nil {
		return time.Time{}, fmt.Errorf("read when the minutes of [%s, %s) were last stored: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, int64(last)).UTC(), nil
}

// FirstMinute is the start of the earliest minute stored, zero when none.
func FirstMinute(ctx context.Context, conn driver.Conn) (time.Time, error) {
	return chquery.Latest(ctx, conn, `SELECT count(), min(minute) FROM attribution_minutes`, "the earliest attributed minute")
}
