package period

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Closed is a closed period as stored: its report as rendered and its totals.
type Closed struct {
	Period     Month
	Version    uint32
	Timezone   string
	Start, End time.Time
	ClosedAt   time.Time
	Report     []byte // the tenant report's CSV, byte for byte as closed
	Currency   string
	// Totals of the period's own rows (list cost without the unallocated row), and of its
	// correction lines' cost.
	ListCost, Cost, WasteCost, OverheadCost, UnallocatedListCost, CorrectionCost decimal.Decimal
}

// Line is one tenant and tier of a close: one of the period's own rows (Corrects empty) or a
// correction line of an earlier period.
type Line struct {
	Corrects                                string
	Tenant, Tier                            string
	Allocated, Unmetered                    time.Duration
	ListCost, Cost, WasteCost, OverheadCost decimal.Decimal
	Currency                                string
}

// Version is the version of a first close; the record format leaves room for a re-close
// (not offered: a closed period is corrected in later periods instead).
const Version = 1

// chosen selects the close every reader takes of each period: the highest version, then the
// earliest close (two closers racing both write; the first one wins for everyone).
const chosen = `SELECT period, version, closed_ns FROM ` + tables.BillingPeriods + `
ORDER BY period, version DESC, closed_ns ASC LIMIT 1 BY period`

var periodColumns = `period, version, timezone, window_start, window_end, closed_ns, report, currency,
    list_cost, cost, waste_cost, overhead_cost, unallocated_list_cost, correction_cost`

func scanClosed(scan func(...any) error) (Closed, error) {
	var (
		c        Closed
		name     string
		closedNS uint64
		report   string
	)
	err := scan(&name, &c.Version, &c.Timezone, &c.Start, &c.End, &closedNS, &report, &c.Currency,
		&c.ListCost, &c.Cost, &c.WasteCost, &c.OverheadCost, &c.UnallocatedListCost, &c.CorrectionCost)
	if err != nil {
		return c, err
	}
	m, err := Parse(name)
	if err != nil {
		return c, fmt.Errorf("stored %w", err)
	}
	c.Period, c.Report, c.ClosedAt = m, []byte(report), time.Unix(0, int64(closedNS)).UTC()
	c.Start, c.End = c.Start.UTC(), c.End.UTC()
	return c, nil
}

// List is every closed period, in period order.
func List(ctx context.Context, conn driver.Conn) ([]Closed, error) {
	rows, err := conn.Query(ctx, `SELECT `+periodColumns+` FROM `+tables.BillingPeriods+`
ORDER BY period, version DESC, closed_ns ASC LIMIT 1 BY period`)
	if err != nil {
		return nil, fmt.Errorf("list the closed billing periods: %w", err)
	}
	defer rows.Close()
	var out []Closed
	for rows.Next() {
		c, err := scanClosed(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("read a closed billing period: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the closed billing periods: %w", err)
	}
	return out, nil
}

// Get is the closed period m; ok is false when m is not closed.
func Get(ctx context.Context, conn driver.Conn, m Month) (c Closed, ok bool, err error) {
	rows, err := conn.Query(ctx, `SELECT `+periodColumns+` FROM `+tables.BillingPeriods+`
WHERE period = ? ORDER BY version DESC, closed_ns ASC LIMIT 1`, m.String())
	if err != nil {
		return Closed{}, false, fmt.Errorf("read the closed billing period %s: %w", m, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return Closed{}, false, rows.Err()
	}
	c, err = scanClosed(rows.Scan)
	if err != nil {
		return Closed{}, false, fmt.Errorf("read the closed billing period %s: %w", m, err)
	}
	return c, true, nil
}

// LineKey is a tenant and tier, the key of Billed's lines.
type LineKey struct{ Tenant, Tier string }

// Key is the LineKey of a tenant and tier.
func Key(tenant, tier string) LineKey { return LineKey{Tenant: tenant, Tier: tier} }

// Billed is what the closed periods billed for m, per tenant and tier: m's own rows plus every
// correction line of m in later closed periods.
func Billed(ctx context.Context, conn driver.Conn, m Month) (map[LineKey]Line, error) {
	rows, err := conn.Query(ctx, `SELECT tenant, tier, sum(allocated_ns), sum(unmetered_ns), sum(list_cost), sum(cost),
    sum(waste_cost), sum(overhead_cost), any(currency)
FROM `+tables.BillingPeriodLines+`
WHERE (period, closed_ns) IN (SELECT period, closed_ns FROM (`+chosen+`))
    AND ((period = ? AND corrects = '') OR corrects = ?)
GROUP BY tenant, tier`, m.String(), m.String())
	if err != nil {
		return nil, fmt.Errorf("sum what the closed periods billed for %s: %w", m, err)
	}
	defer rows.Close()
	out := map[LineKey]Line{}
	for rows.Next() {
		var (
			l                    Line
			allocated, unmetered int64
		)
		if err := rows.Scan(&l.Tenant, &l.Tier, &allocated, &unmetered, &l.ListCost, &l.Cost, &l.WasteCost, &l.OverheadCost, &l.Currency); err != nil {
			return nil, fmt.Errorf("read what the closed periods billed for %s: %w", m, err)
		}
		l.Allocated, l.Unmetered = time.Duration(allocated), time.Duration(unmetered)
		out[LineKey{l.Tenant, l.Tier}] = l
	}
	return out, rows.Err()
}

// Lines are the lines of m's chosen close: its own rows (Corrects empty) and the corrections
// of earlier periods it bills, by corrected period, tenant and tier; none while m is open.
func Lines(ctx context.Context, conn driver.Conn, m Month) ([]Line, error) {
	rows, err := conn.Query(ctx, `SELECT corrects, tenant, tier, allocated_ns, unmetered_ns, list_cost, cost, waste_cost, overhead_cost, currency
FROM `+tables.BillingPeriodLines+`
WHERE (period, closed_ns) IN (SELECT period, closed_ns FROM (`+chosen+`)) AND period = ?
ORDER BY corrects, tenant, tier`, m.String())
	if err != nil {
		return nil, fmt.Errorf("read the lines of closed period %s: %w", m, err)
	}
	defer rows.Close()
	var out []Line
	for rows.Next() {
		var (
			l                    Line
			allocated, unmetered int64
		)
		if err := rows.Scan(&l.Corrects, &l.Tenant, &l.Tier, &allocated, &unmetered, &l.ListCost, &l.Cost, &l.WasteCost, &l.OverheadCost, &l.Currency); err != nil {
			return nil, fmt.Errorf("read a line of closed period %s: %w", m, err)
		}
		l.Allocated, l.Unmetered = time.Duration(allocated), time.Duration(unmetered)
		out = append(out, l)
	}
	return out, rows.Err()
}

var (
	insertPeriod = tables.Insert(tables.BillingPeriods, tables.BillingPeriodColumns)
	insertLines  = tables.Insert(tables.BillingPeriodLines, tables.BillingPeriodLineColumns)
)

// write stores a close: its lines first, then the period's row, which makes it a close (lines
// of a close whose row never came are never read: readers join on the chosen closes).
func write(ctx context.Context, conn driver.Conn, c Closed, lines []Line) error {
	closedNS := uint64(c.ClosedAt.UnixNano())
	if len(lines) > 0 {
		batch, err := conn.PrepareBatch(ctx, insertLines)
		if err != nil {
			return fmt.Errorf("prepare the lines of period %s: %w", c.Period, err)
		}
		for _, l := range lines {
			if err := batch.Append(c.Period.String(), closedNS, l.Corrects, l.Tenant, l.Tier, int64(l.Allocated), int64(l.Unmetered),
				l.ListCost, l.Cost, l.WasteCost, l.OverheadCost, l.Currency); err != nil {
				_ = batch.Abort()
				return fmt.Errorf("append a line of period %s (tenant %s): %w", c.Period, l.Tenant, err)
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("store the %d lines of period %s: %w", len(lines), c.Period, err)
		}
	}
	batch, err := conn.PrepareBatch(ctx, insertPeriod)
	if err != nil {
		return fmt.Errorf("prepare the close of period %s: %w", c.Period, err)
	}
	if err := batch.Append(c.Period.String(), c.Version, c.Timezone, c.Start, c.End, closedNS, string(c.Report), c.Currency,
		c.ListCost, c.Cost, c.WasteCost, c.OverheadCost, c.UnallocatedListCost, c.CorrectionCost); err != nil {
		_ = batch.Abort()
		return fmt.Errorf("append the close of period %s: %w", c.Period, err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("store the close of period %s: %w", c.Period, err)
	}
	return nil
}

// ListHeader is the header of WriteList's CSV.
var ListHeader = []string{"period", "version", "timezone", "window_start", "window_end", "closed_at", "currency",
	"list_cost", "cost", "waste_cost", "overhead_cost", "unallocated_list_cost", "correction_cost", "report_bytes"}

// WriteList writes closed periods as CSV (ListHeader): totals with the report's 6 decimals.
func WriteList(w io.Writer, closed []Closed) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(ListHeader); err != nil {
		return fmt.Errorf("write the closed periods: %w", err)
	}
	for _, c := range closed {
		rec := []string{c.Period.String(), strconv.FormatUint(uint64(c.Version), 10), c.Timezone,
			c.Start.Format(time.RFC3339), c.End.Format(time.RFC3339), c.ClosedAt.Format(time.RFC3339Nano), c.Currency}
		for _, d := range []decimal.Decimal{c.ListCost, c.Cost, c.WasteCost, c.OverheadCost, c.UnallocatedListCost, c.CorrectionCost} {
			rec = append(rec, d.StringFixed(6))
		}
		if err := cw.Write(append(rec, strconv.Itoa(len(c.Report)))); err != nil {
			return fmt.Errorf("write the closed periods: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write the closed periods: %w", err)
	}
	return nil
}
