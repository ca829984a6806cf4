package period

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// ErrClosed is what closing a period that is closed already wraps: closing is refused, never
// repeated, so that a closed period's report is the one stored first.
var ErrClosed = errors.New("the billing period is closed already")

// ErrNotOver is what closing a period that has not ended (or not past the attribution delay)
// wraps.
var ErrNotOver = errors.New("the billing period is not over")

// ErrOutOfOrder is what closing a period before a later one that is closed wraps: corrections
// go forward only.
var ErrOutOfOrder = errors.New("a later billing period is closed already")

// ErrOwed is what closing a period wraps while stored minutes of it are still to be
// attributed again or have no stored pass (recorded recomputations not done, stored.Pending):
// a close would bill them as they are.
var ErrOwed = errors.New("stored minutes of the billing period are stale or missing")

// DefaultLookback is how many closed periods before the one being closed are recomputed for
// corrections.
const DefaultLookback = 12

// Closer closes billing periods.
type Closer struct {
	Conn driver.Conn
	Book *pricebook.PriceBook
	// Options say how a period's report is computed (Samples, FromMinutes, Presence, Delay);
	// From, To and Now are set for each report.
	Options attribution.Options
	// Lookback: how many closed periods before the one closed are recomputed for correction
	// lines (0: DefaultLookback). Later data for an older period is not billed.
	Lookback int
	// Export, when its Dir is set, writes the FOCUS files of each period closed: its Usage
	// rows hour by hour (computed with Options) and its correction lines.
	Export *focus.MonthlyExport
	// Logger gets the notes of each report computed (unpriced, unsampled, overlapping
	// allocations), which the stored report has no column for (nil: slog.Default()).
	Logger *slog.Logger
}

// logNotes logs the report's notes once: a period is closed once, so they do not recur.
func (c Closer) logNotes(ctx context.Context, rep report.Report) {
	attribution.LogNotes(ctx, c.logger(), rep)
}

func (c Closer) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.Default()
	}
	return c.Logger
}

// Tolerance is below any difference worth a correction line: recomputing the same data in
// floating point may differ in the last bits, and such noise must not bill anyone. Money is
// rendered with 6 decimals.
var Tolerance = decimal.New(1, -9)

// Close closes the period m as of now: its report (with correction lines for the closed
// periods before it) is computed through attribution.Report, stored once, and returned as
// stored. It is refused for a period closed already (ErrClosed), one not over (ErrNotOver)
// and one before a closed period (ErrOutOfOrder).
// WithFOCUSVersion is the closer writing its FOCUS files (if it writes any) in version v.
func (c Closer) WithFOCUSVersion(v focus.Version) Closer {
	if c.Export != nil {
		e := *c.Export
		e.Version = v
		c.Export = &e
	}
	return c
}

func (c Closer) Close(ctx context.Context, m Month, now time.Time) (Closed, error) {
	zone := c.Book.Zone()
	start, end := m.Bounds(zone)
	o := c.Options
	o.Now = now
	if o.From, o.To = start, end; o.Horizon().Before(end) {
		return Closed{}, fmt.Errorf("close billing period %s: %w: it ends at %s (%s)", m, ErrNotOver, end.Format(time.RFC3339), zone)
	}
	closed, err := List(ctx, c.Conn)
	if err != nil {
		return Closed{}, err
	}
	for _, p := range closed {
		switch {
		case p.Period == m:
			return p, fmt.Errorf("close billing period %s: %w (version %d, closed at %s)", m, ErrClosed, p.Version, p.ClosedAt.Format(time.RFC3339))
		case m.Before(p.Period):
			return Closed{}, fmt.Errorf("close billing period %s: %w (%s)", m, ErrOutOfOrder, p.Period)
		}
	}
	if err := checkOwed(ctx, c.Conn, start, end); err != nil {
		return Closed{}, fmt.Errorf("close billing period %s: %w", m, err)
	}
	// A month's report takes a while: its start and its end (the caller logs the close) are said.
	began := time.Now()
	c.logger().InfoContext(ctx, "closing billing period: computing its report", "period", m.String(), "from", start, "to", end)
	res, err := attribution.Report(ctx, c.Conn, c.Book, o)
	if err != nil {
		return Closed{}, fmt.Errorf("close billing period %s: %w", m, err)
	}
	c.logNotes(ctx, res.Report)
	rep := res.Report
	lookback := c.Lookback
	if lookback <= 0 {
		lookback = DefaultLookback
	}
	var corrections []Line
	for _, p := range closed {
		if p.Period.Before(m.Add(-lookback)) {
			continue
		}
		lines, err := c.corrections(ctx, p, closed[len(closed)-1].ClosedAt, now)
		if err != nil {
			return Closed{}, fmt.Errorf("close billing period %s: corrections of %s: %w", m, p.Period, err)
		}
		corrections = append(corrections, lines...)
	}
	own := linesOf(rep, "")
	rep.Corrections = correctionRows(corrections, rep)
	var csv bytes.Buffer
	if err := rep.WriteCSV(&csv); err != nil {
		return Closed{}, fmt.Errorf("close billing period %s: render the report: %w", m, err)
	}
	out := Closed{Period: m, Version: Version, Timezone: zone.String(), Start: start, End: end, ClosedAt: now.UTC(),
		Report: csv.Bytes(), Currency: rep.Currency}
	for _, l := range own {
		if l.Tenant == report.Unallocated {
			out.UnallocatedListCost = out.UnallocatedListCost.Add(l.ListCost)
			continue
		}
		out.ListCost, out.Cost = out.ListCost.Add(l.ListCost), out.Cost.Add(l.Cost)
		out.WasteCost, out.OverheadCost = out.WasteCost.Add(l.WasteCost), out.OverheadCost.Add(l.OverheadCost)
	}
	for _, l := range corrections {
		out.CorrectionCost = out.CorrectionCost.Add(l.Cost)
	}
	if err := write(ctx, c.Conn, out, slices.Concat(own, corrections)); err != nil {
		return Closed{}, err
	}
	c.logger().InfoContext(ctx, "billing period report stored", "period", m.String(), "lines", len(own), "corrections", len(corrections),
		"took", time.Since(began).Round(time.Millisecond))
	// What every reader sees: ours, unless another closer stored the same period first.
	stored, ok, err := Get(ctx, c.Conn, m)
	if err != nil || !ok {
		return out, err
	}
	if c.Export != nil && c.Export.Dir != "" {
		if _, err := c.Export.Month(ctx, focus.ForAttribution(c.Conn, c.Book, o, nil), focus.PeriodOf(start, zone), rep); err != nil {
			return stored, fmt.Errorf("billing period %s is closed, its FOCUS files are not written: %w", m, err)
		}
	}
	return stored, nil
}

// checkOwed is an error wrapping ErrOwed when recomputations not done owe minutes of
// [start, end).
func checkOwed(ctx context.Context, conn store.Querier, start, end time.Time) error {
	owed, err := stored.Pending(ctx, conn, start, end)
	if err != nil {
		return fmt.Errorf("check that no stored minute of the period is owed a recomputation: %w", err)
	}
	if len(owed) == 0 {
		return nil
	}
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(owed)) {
		parts = append(parts, fmt.Sprintf("%d minutes (%s)", owed[reason], reason))
	}
	return fmt.Errorf("%w: %s still to be attributed again; the attribution service is doing it "+
		"(slicemeter_attribution_stale_seconds, slicemeter_attribution_missing_seconds): close once they are 0", ErrOwed, strings.Join(parts, ", "))
}

// corrections are the lines that bring what the closed periods billed for p to its report
// recomputed now: one per tenant and tier whose amounts or seconds differ.
//
// From the stored minutes, a period none of whose minutes was stored again since the last close
// (since, which recomputed it too, or closed it) is billed in full already: it is not
// recomputed, which would read a month of minutes for nothing. From the samples, it always is.
func (c Closer) corrections(ctx context.Context, p Closed, since, now time.Time) ([]Line, error) {
	if c.Options.FromMinutes {
		last, err := stored.LastPassIn(ctx, c.Conn, p.Start, p.End)
		if err != nil {
			return nil, err
		}
		if !last.After(since) {
			return nil, nil
		}
	}
	o := c.Options
	o.From, o.To, o.Now = p.Start, p.End, now
	res, err := attribution.Report(ctx, c.Conn, c.Book, o)
	if err != nil {
		return nil, err
	}
	c.logNotes(ctx, res.Report)
	billed, err := Billed(ctx, c.Conn, p.Period)
	if err != nil {
		return nil, err
	}
	return diffLines(p.Period.String(), linesOf(res.Report, ""), billed), nil
}

// diffLines are the correction lines of the period named corrects: per tenant and tier, the
// recomputed line minus what was billed, where an amount differs by more than Tolerance or
// the seconds differ; what was billed and is gone now (an allocation deleted since) is
// credited in full. Recomputed lines keep their order, gone ones follow by tenant and tier.
func diffLines(corrects string, recomputed []Line, billed map[LineKey]Line) []Line {
	var out []Line
	seen := map[LineKey]bool{}
	diff := func(now, was Line) {
		d := Line{Corrects: corrects, Tenant: now.Tenant, Tier: now.Tier, Currency: now.Currency,
			Allocated: now.Allocated - was.Allocated, Unmetered: now.Unmetered - was.Unmetered,
			ListCost: now.ListCost.Sub(was.ListCost), Cost: now.Cost.Sub(was.Cost),
			WasteCost: now.WasteCost.Sub(was.WasteCost), OverheadCost: now.OverheadCost.Sub(was.OverheadCost)}
		if d.Currency == "" {
			d.Currency = was.Currency
		}
		if d.Allocated != 0 || d.Unmetered != 0 || d.ListCost.Abs().GreaterThan(Tolerance) || d.Cost.Abs().GreaterThan(Tolerance) ||
			d.WasteCost.Abs().GreaterThan(Tolerance) || d.OverheadCost.Abs().GreaterThan(Tolerance) {
			out = append(out, d)
		}
	}
	for _, l := range recomputed {
		k := LineKey{l.Tenant, l.Tier}
		seen[k] = true
		diff(l, billed[k])
	}
	var gone []LineKey
	for k := range billed {
		if !seen[k] {
			gone = append(gone, k)
		}
	}
	slices.SortFunc(gone, func(a, b LineKey) int { return strings.Compare(a.Tenant+"\x00"+a.Tier, b.Tenant+"\x00"+b.Tier) })
	for _, k := range gone {
		diff(Line{Tenant: k.Tenant, Tier: k.Tier}, billed[k])
	}
	return out
}

// money is a report's amount as Decimal (stored.Money); a report has no non-finite amount
// (rendering refuses them), so the error cannot happen for a report that was written.
func money(f float64) decimal.Decimal {
	d, err := stored.Money(f)
	if err != nil {
		return decimal.Zero
	}
	return d
}

// linesOf is a report's rows as lines (the __unallocated__ row with its list cost), in the
// report's order.
func linesOf(r report.Report, corrects string) []Line {
	var out []Line
	for _, row := range r.Rows() {
		out = append(out, Line{Corrects: corrects, Tenant: row.Tenant, Tier: row.Tier, Allocated: row.Allocated, Unmetered: row.Unmetered,
			ListCost: money(row.ListCost), Cost: money(row.Cost), WasteCost: money(row.WasteCost), OverheadCost: money(row.OverheadCost),
			Currency: row.Currency})
	}
	return out
}

// correctionRows are the report rows of correction lines, in the window of the report that
// bills them: tier correction:PERIOD, the differences in the amounts and seconds.
func correctionRows(lines []Line, r report.Report) []report.Row {
	var out []report.Row
	for _, l := range lines {
		out = append(out, report.Row{Tenant: l.Tenant, Tier: report.CorrectionTier(l.Corrects), WindowStart: r.WindowStart, WindowEnd: r.WindowEnd,
			Allocated: l.Allocated, Unmetered: l.Unmetered, ListCost: l.ListCost.InexactFloat64(), Cost: l.Cost.InexactFloat64(),
			WasteCost: l.WasteCost.InexactFloat64(), OverheadCost: l.OverheadCost.InexactFloat64(), Currency: l.Currency})
	}
	return out
}

// DefaultCloseAfter is how long after its end the attribution service closes a period: late
// samples and allocations of its last days still count in it.
const DefaultCloseAfter = 72 * time.Hour

// Due is the periods due to close at now, in order: every period that ended at least after
// before now and is not closed, from the one after the last closed period, or with none closed
// the latest due one only (older months are closed by hand, `slicemeter period close`), and
// from the stored minutes only once they cover it (a service whose stored minutes begin within
// a month cannot close that one: it waits for the next, instead of failing at every pass).
func Due(ctx context.Context, c Closer, after time.Duration, now time.Time) ([]Month, error) {
	latest := Of(now.Add(-after), c.Book.Zone()).Add(-1)
	closed, err := List(ctx, c.Conn)
	if err != nil {
		return nil, err
	}
	next := latest
	if len(closed) > 0 {
		next = closed[len(closed)-1].Period.Add(1)
	} else if c.Options.FromMinutes {
		first, err := stored.FirstMinute(ctx, c.Conn)
		if err != nil {
			return nil, err
		}
		if start, _ := latest.Bounds(c.Book.Zone()); first.IsZero() || first.After(start) {
			return nil, nil
		}
	}
	var out []Month
	for m := next; !latest.Before(m); m = m.Add(1) {
		out = append(out, m)
	}
	return out, nil
}

// CloseDue closes, in order, every period Due at now. It returns the closes it made; a period
// another closer closed meanwhile is skipped. An error names the period that could not close
// (a *DueError: the periods after it wait, as closes go in order).
func CloseDue(ctx context.Context, c Closer, after time.Duration, now time.Time) ([]Closed, error) {
	due, err := Due(ctx, c, after, now)
	if err != nil {
		return nil, err
	}
	var out []Closed
	for i, m := range due {
		p, err := c.Close(ctx, m, now)
		switch {
		case errors.Is(err, ErrClosed):
			continue
		case err != nil:
			return out, &DueError{Period: m, Waiting: due[i+1:], Err: err}
		}
		out = append(out, p)
	}
	return out, nil
}

// DueError is a period due that could not be closed, and the later ones due that wait for it.
type DueError struct {
	Period  Month
	Waiting []Month
	Err     error
}

func (e *DueError) Error() string { return e.Err.Error() }

// Unwrap makes errors.Is see the close's error.
func (e *DueError) Unwrap() error { return e.Err }
