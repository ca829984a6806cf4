package focus

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Hourly is the report of one window of at most an hour with its line items.
type Hourly func(ctx context.Context, from, to time.Time) (report.Report, error)

// FromAttribution is the Hourly of attribution.Report with the options (From, To and Lines
// set for each window), its notes logged.
func FromAttribution(conn store.Querier, book *pricebook.PriceBook, o attribution.Options, logger *slog.Logger) Hourly {
	return func(ctx context.Context, from, to time.Time) (report.Report, error) {
		o.From, o.To, o.Lines = from, to, true
		res, err := attribution.Report(ctx, conn, book, o)
		if logger != nil {
			attribution.LogNotes(ctx, logger, res.Report)
		}
		return res.Report, err
	}
}

// Stream gives the line items of [from, to) hour by hour, in one pass; false when it cannot
// for that range (the caller then asks Hourly for each hour). Each hour's rows are each's to
// keep: an export writes them while the stream reads the next hours.
type Stream func(ctx context.Context, from, to time.Time, each func(w report.Window, rows []report.AllocationRow) error) (bool, error)

// ForAttribution is the export of attribution.Report's line items with the options: from the
// stored minutes (o.FromMinutes) a range of whole hours up to the horizon is read as one
// stream of hours (stored.HourlyLines), anything else hour by hour.
func ForAttribution(conn store.Querier, book *pricebook.PriceBook, o attribution.Options, logger *slog.Logger) Export {
	e := Export{Report: FromAttribution(conn, book, o, logger), Zone: book.Zone()}
	if !o.FromMinutes {
		return e
	}
	e.Stream = func(ctx context.Context, from, to time.Time, each func(report.Window, []report.AllocationRow) error) (bool, error) {
		o.From, o.To = from, to
		if !o.Horizon().Equal(to) || !from.Equal(from.Truncate(time.Hour)) || !to.Equal(to.Truncate(time.Hour)) {
			return false, nil
		}
		return true, stored.HourlyLines(ctx, conn, from, to, func(hour time.Time, lines []billing.Line) error {
			w := report.Window{Start: hour, End: hour.Add(time.Hour)}
			return each(w, billing.AllocationRows(lines, billing.Interval{Start: w.Start.UnixNano(), End: w.End.UnixNano()}, book.Currency))
		})
	}
	return e
}

// Export writes the FOCUS rows of a range.
type Export struct {
	Report Hourly
	// Stream, when set, is tried first (Report for the hours it cannot give).
	Stream Stream
	// Zone is the billing periods' (the price book's); nil: UTC.
	Zone   *time.Location
	Issuer Issuer
	// Tenants, when set, are the only tenants whose rows are written (a tenant's scope).
	Tenants []string
}

// Totals are what an export wrote.
type Totals struct {
	Rows int
	// BilledCost and ListCost per tenant (BillingAccountId).
	BilledCost, ListCost map[string]float64
}

func (t *Totals) add(r Row) {
	if t.BilledCost == nil {
		t.BilledCost, t.ListCost = map[string]float64{}, map[string]float64{}
	}
	t.Rows++
	t.BilledCost[r.BillingAccountId] += r.BilledCost
	t.ListCost[r.BillingAccountId] += r.ListCost
}

func (e Export) has(tenant string) bool {
	if e.Tenants == nil {
		return true
	}
	for _, t := range e.Tenants {
		if t == tenant {
			return true
		}
	}
	return false
}

// Hours cuts [from, to) at every UTC hour and at the billing periods' edges (a zone with a
// half-hour offset starts its months inside an hour): the charge periods of the Usage rows.
func Hours(from, to time.Time, zone *time.Location) []report.Window {
	if zone == nil {
		zone = time.UTC
	}
	var out []report.Window
	for t := from.UTC(); t.Before(to); {
		end := t.Truncate(time.Hour).Add(time.Hour)
		if m := report.MonthStart(t, zone, 1); m.Before(end) {
			end = m
		}
		if end.After(to) {
			end = to
		}
		out = append(out, report.Window{Start: t, End: end})
		t = end
	}
	return out
}

// CountHours is len(Hours(from, to, zone)), computed from the parameters (one step per month
// of the window, none per hour), so that an export's cost is known before any hour is built.
func CountHours(from, to time.Time, zone *time.Location) int {
	if !from.Before(to) {
		return 0
	}
	if zone == nil {
		zone = time.UTC
	}
	// The UTC hour edges strictly inside (from, to): floor(from/1h)+1 .. ceil(to/1h)-1.
	const hour = int64(time.Hour / time.Second)
	first := floorDiv(from.Unix(), hour) + 1
	last := floorDiv(to.Unix(), hour)
	if to.Unix()%hour == 0 && to.Nanosecond() == 0 {
		last--
	}
	cuts := max(0, last-first+1)
	// And the period edges inside it that are not on an hour (a half-hour zone's months).
	for m := report.MonthStart(from, zone, 1); m.Before(to); m = report.MonthStart(m, zone, 1) {
		if m.Unix()%hour != 0 || m.Nanosecond() != 0 {
			cuts++
		}
	}
	return int(min(cuts+1, int64(math.MaxInt)))
}

// FirstHourEnd is the end of Hours(from, to, zone)'s first window, without building the rest.
func FirstHourEnd(from, to time.Time, zone *time.Location) time.Time {
	if zone == nil {
		zone = time.UTC
	}
	t := from.UTC()
	end := t.Truncate(time.Hour).Add(time.Hour)
	if m := report.MonthStart(t, zone, 1); m.Before(end) {
		end = m
	}
	if end.After(to) {
		end = to
	}
	return end
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Usage writes one Usage row per line item of each hour of [from, to), hour by hour: only
// one hour's report is held at a time.
func (e Export) Usage(ctx context.Context, from, to time.Time, w Writer) (Totals, error) {
	var tot Totals
	write := func(h report.Window, rows []report.AllocationRow) error {
		p := PeriodOf(h.Start, zoneOr(e.Zone))
		for _, a := range rows {
			if !e.has(a.Tenant) {
				continue
			}
			r := Usage(a, p, e.Issuer)
			if err := w.Write(r); err != nil {
				return err
			}
			tot.add(r)
		}
		return nil
	}
	hours := Hours(from, to, e.Zone)
	if e.Stream != nil && wholeHours(hours) {
		ok, err := pipelined(ctx, e.Stream, from, to, write)
		if err != nil {
			return tot, fmt.Errorf("FOCUS rows of [%s, %s): %w", from.Format(DateTime), to.Format(DateTime), err)
		}
		if ok {
			return tot, nil
		}
	}
	for _, h := range hours {
		rep, err := e.Report(ctx, h.Start, h.End)
		if err == nil {
			err = write(h, rep.Allocations)
		}
		if err != nil {
			return tot, fmt.Errorf("FOCUS rows of %s: %w", h.Start.Format(DateTime), err)
		}
	}
	return tot, nil
}

// aheadHours is how many hours a stream reads ahead of the rows being written: a day, what
// stored.HourlyLines reads at once (about 250 KB of rows an hour for 1000 allocations).
const aheadHours = 24

// pipelined runs the stream in a goroutine and writes each hour's rows on this one, so that
// ClickHouse reads and the driver scans the next hours while the rows are encoded and
// written, instead of each waiting on the other. At most aheadHours are held.
func pipelined(ctx context.Context, stream Stream, from, to time.Time, write func(report.Window, []report.AllocationRow) error) (bool, error) {
	type hour struct {
		w    report.Window
		rows []report.AllocationRow
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hours := make(chan hour, aheadHours)
	var (
		ok      bool
		readErr error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(hours)
		ok, readErr = stream(ctx, from, to, func(w report.Window, rows []report.AllocationRow) error {
			// A select picks among ready cases at random, so a cancelled stream would go on
			// reading while the channel has room: look at ctx first.
			if err := ctx.Err(); err != nil {
				return err
			}
			select {
			case hours <- hour{w, rows}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for h := range hours {
		if err := write(h.w, h.rows); err != nil {
			// Stop reading: the stream sees the cancel at its next hour, or blocks on the
			// full channel, where only ctx.Done is ready; nothing drains the channel any more.
			cancel()
			<-done
			return true, err
		}
	}
	<-done
	return ok, readErr
}

// wholeHours says whether every window is a whole UTC hour (no month starts inside one).
func wholeHours(ws []report.Window) bool {
	for _, w := range ws {
		if w.End.Sub(w.Start) != time.Hour || !w.Start.Equal(w.Start.Truncate(time.Hour)) {
			return false
		}
	}
	return true
}

// Corrections writes a Correction row for each of the closed period's correction lines
// (rep.Corrections) of a tenant; the period p bills them. The __unallocated__ row's
// corrections are not a tenant's charge and have no row.
func (e Export) Corrections(rep report.Report, p Period, w Writer, tot *Totals) error {
	for _, c := range rep.Corrections {
		if c.Tenant == report.Unallocated || !e.has(c.Tenant) {
			continue
		}
		name := strings.TrimPrefix(c.Tier, report.CorrectionPrefix)
		start, err := time.ParseInLocation("2006-01", name, zoneOr(e.Zone))
		if err != nil {
			return fmt.Errorf("correction line of tenant %q: tier %q names no month", c.Tenant, c.Tier)
		}
		r := Correction(c, PeriodOf(start, zoneOr(e.Zone)), p, e.Issuer)
		if err := w.Write(r); err != nil {
			return err
		}
		tot.add(r)
	}
	return nil
}

func zoneOr(z *time.Location) *time.Location {
	if z == nil {
		return time.UTC
	}
	return z
}
