// Package attribution joins the samples in ClickHouse with the tenants' allocations and
// computes, per tenant and window, the definitions of attribution/README.md: cost, waste, overhead, efficiency,
// p99 scheduling jitter and cold start, and the unallocated capacity.
//
// Report is the one way to a window's report, for the CLI, the API, the demo and the service:
// computed from the raw samples or the collector's rollups, or summed from the minutes the
// attribution service stored, with the noisy neighbours or each allocation's line as asked,
// and always checked against the invariants.
// Around it: billing (the definitions), store (ClickHouse), pricebook (prices, tiers,
// contracts, effective-dated changes), report (rendering, windows of a step), allocations
// (allocations from files and HTTP into ClickHouse), service (the attribution service: every
// closed minute attributed and stored, SLA metrics, the API) and api (the HTTP API).
package attribution

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Options say which report of which window Report computes.
type Options struct {
	From, To time.Time
	// Samples is where the sample aggregates are read from (raw samples by default).
	Samples store.Samples
	// FromMinutes sums the minutes the attribution service stored instead (whole minutes;
	// the price book is not needed).
	FromMinutes bool
	// Neighbours sets each row's noisy neighbour (the JSON report carries it).
	Neighbours bool
	// Lines asks for each allocation's line too (Result.Lines, and Report.Allocations: the
	// line items).
	Lines bool
	// Presence is the presence period: a GPU is capacity from each of its samples for this
	// long, within the window (attribution/README.md, "Definitions"); zero: DefaultPresence. At least a
	// minute.
	Presence time.Duration
	// Present, when set, is the GPUs' presence read beforehand for a span that holds the
	// window (store.ReadPresence or its Advance, the same period and sample source): the
	// attribution service reads it once a pass, not once a minute. Nil: read for the window.
	Present *store.Presence
	// ColdStarts, when set, remembers the allocations' first attached samples from one report
	// to the next (the attribution service's passes; store.ColdStarts says when an answer is
	// reused). Nil: every report searches.
	ColdStarts *store.ColdStarts
	// Now is when the report is made (zero: time.Now()); Delay the attribution delay (zero:
	// DefaultDelay; negative: none). The report bills up to its horizon, the earlier of To
	// and Now − Delay: never the future. Open allocations are billed to the horizon, and the
	// report's window ends there.
	Now   time.Time
	Delay time.Duration
	// Nodes, when set, keeps only the nodes it accepts (from the samples): their GPUs, their
	// instances and the allocations on them (nil: every node). An attribution replica that
	// shares the fleet by node computes its nodes alone; a node's minute depends on nothing
	// of another node's, so the replicas' minutes are those of one. The tenant rows then cover
	// those nodes only: the minutes the service stores are per allocation and node.
	Nodes func(node string) bool
}

// DefaultDelay is how long after a moment its samples are taken as complete.
const DefaultDelay = 30 * time.Second

// DefaultPresence is the presence period: an exporter outage shorter than it leaves the GPU's
// capacity as it was.
const DefaultPresence = time.Hour

// PresencePeriod is the presence period the options ask for.
func (o Options) PresencePeriod() time.Duration {
	if o.Presence == 0 {
		return DefaultPresence
	}
	return o.Presence
}

// Horizon is where the report of the options' window stops billing: the earlier of To and
// Now − Delay, not before From; for the stored minutes, the last whole minute.
func (o Options) Horizon() time.Time {
	now, delay := o.Now, o.Delay
	if now.IsZero() {
		now = time.Now()
	}
	if delay == 0 {
		delay = DefaultDelay
	}
	h := minTime(o.To, now.Add(-max(delay, 0)))
	if o.FromMinutes {
		h = h.Truncate(time.Minute)
	}
	if h.Before(o.From) {
		return o.From
	}
	return h
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Result is a window's report and what came with it.
type Result struct {
	Report report.Report
	// Lines are the allocations' lines in requested_at order, with Options.Lines.
	Lines []billing.Line
	// Violations are the ways the report breaks its invariants (billing.CheckInvariants).
	Violations []error
}

// ErrInvariants is what Report's error wraps when the report breaks its invariants: the
// Result is complete then, and its Violations say how.
var ErrInvariants = errors.New("the report breaks its invariants")

// Report builds the tenant report of the window [From, To) from the samples and allocations
// in ClickHouse, priced by the price book, or from the stored minutes (Options.FromMinutes).
//
// What the price book cannot price (a GPU model without a price, an allocation at an unknown
// tier or on such a GPU) does not stop the report: it is attributed as unpriced, left out of
// the money and of the capacity (Report.Unpriced, with a note), and every other tenant is
// billed. An allocation whose target was never sampled is left out too (Report.Unsampled), and
// so is one whose terms cannot be computed (Report.Failed): one bad allocation never stops the
// bill of the others.
// Things worth knowing that do not stop the report (these, a tenant at several tiers, an
// allocation whose cold start is unknown) are in Report.Notes, for the caller to log
// (LogNotes). A report that breaks its invariants is returned with an error wrapping
// ErrInvariants: a caller that serves or prints reports fails, the service counts them.
func Report(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, o Options) (Result, error) {
	var (
		res Result
		err error
	)
	// Every edge is converted to nanoseconds below (UnixNano wraps outside 1678..2262, and a
	// DateTime holds 1970..2106): a window outside the range every door accepts is refused
	// here too, rather than reported for other times.
	for _, edge := range []struct {
		name string
		t    time.Time
	}{{"from", o.From}, {"to", o.To}} {
		if r := validate.CheckTime(edge.name, edge.t.Format(time.RFC3339Nano), edge.t); r != nil {
			return res, fmt.Errorf("report window: %w", r)
		}
	}
	if !o.From.Before(o.To) {
		return res, fmt.Errorf("report window [%s, %s): the start must be before the end", o.From, o.To)
	}
	to := o.Horizon()
	if !to.After(o.From) {
		// Nothing of the window has happened yet: an empty bill, not a failure.
		res.Report = report.Report{WindowStart: o.From.UTC(), WindowEnd: o.From.UTC()}
		if book != nil {
			res.Report.Currency = book.Currency
		}
		return res, nil
	}
	o.To = to
	if o.FromMinutes {
		res.Report, res.Lines, err = stored.FromMinutesLines(ctx, conn, o.From, o.To)
	} else {
		res.Report, res.Lines, err = compute(ctx, conn, o, book)
	}
	if !o.Lines {
		res.Lines = nil
	} else if err == nil {
		res.Report.Allocations = billing.AllocationRows(res.Lines, billing.Interval{Start: o.From.UnixNano(), End: o.To.UnixNano()}, res.Report.Currency)
	}
	if err == nil && o.Neighbours {
		var top map[string]store.Neighbour
		top, err = store.NoisyNeighbours(ctx, conn, o.From, o.To)
		res.Report = withNeighbours(res.Report, top)
	}
	if err != nil {
		return res, err
	}
	if res.Violations = billing.CheckInvariants(res.Report); len(res.Violations) > 0 {
		return res, fmt.Errorf("%w: %w", ErrInvariants, errors.Join(res.Violations...))
	}
	return res, nil
}

// compute is the report of the options' window [From, To) (To the horizon already) from the
// samples.
func compute(ctx context.Context, conn store.Querier, o Options, book *pricebook.PriceBook) (report.Report, []billing.Line, error) {
	from, to, src := o.From, o.To, o.Samples
	if err := src.Check(); err != nil {
		return report.Report{}, nil, err
	}
	if !from.Before(to) {
		return report.Report{}, nil, fmt.Errorf("report window [%s, %s): the start must be before the end", from, to)
	}
	window := billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}
	allocs, err := store.ReadAllocations(ctx, conn, window)
	if err != nil {
		return report.Report{}, nil, err
	}
	present, err := presenceOf(ctx, conn, o, window)
	if err != nil {
		return report.Report{}, nil, err
	}
	// A replica reads the instances of its own nodes only: those of the presence that it
	// owns (every node with an instance sampled in the window has a GPU present in it).
	fleet, err := store.ReadInstancesInWindow(ctx, conn, src, window, ownedNodes(present, o.Nodes))
	if err != nil {
		return report.Report{}, nil, err
	}
	if fleet.GPUs, err = present.Capacity(window); err != nil {
		return report.Report{}, nil, err
	}
	// The allocations are kept by o.Nodes itself, not by the nodes present: one on a node
	// with no sample for a presence period is still billed (priced from its latest facts).
	// The reads per allocation (ReadInstancesEver, Measure) read only the allocations kept.
	allocs, fleet = onNodes(allocs, fleet, o.Nodes)
	// GPUs of a model without a price are left out of the capacity, and allocations on them or
	// at an unknown tier out of the money: attributed as unpriced, the rest billed as usual.
	pricedFleet, unpricedGPUs := billing.SplitFleet(fleet, window, book)
	capacity, err := billing.CapacityListCost(pricedFleet, window, book)
	if err != nil {
		return report.Report{}, nil, err
	}
	clipped, unseen := billing.Clip(allocs, window, fleet)
	ever, err := store.ReadInstancesEver(ctx, conn, src, unseen)
	if err != nil {
		return report.Report{}, nil, err
	}
	p := billing.Price(clipped, fleet, ever, book)
	priced, unsampled := p.Priced, p.Unsampled
	unpriced, unpricedNotes := billing.Unpriced(unpricedGPUs, p.Unpriced)
	m, err := store.Measure(ctx, conn, src, priced, o.ColdStarts)
	if err != nil {
		return report.Report{}, nil, err
	}

	overlaps := billing.Overlapping(priced)
	lines, coldNotes := billing.Lines(priced, m, book)
	rows, tenantNotes := billing.TenantRows(lines, window, book.Currency)
	notes := slices.Concat(unsampled, overlaps, unpricedNotes, p.Failed, coldNotes, tenantNotes)

	unallocated := capacity
	for _, row := range rows {
		unallocated -= row.ListCost
	}
	byNode, err := unallocatedByNode(pricedFleet, window, book, lines)
	if err != nil {
		return report.Report{}, nil, err
	}
	return report.Report{
		WindowStart:         from.UTC(),
		WindowEnd:           to.UTC(),
		Currency:            book.Currency,
		Tenants:             rows,
		UnallocatedListCost: unallocated,
		UnallocatedByNode:   byNode,
		CapacityListCost:    capacity,
		Notes:               notes,
		Unsampled:           len(unsampled),
		Overlaps:            overlaps,
		Unpriced:            unpriced,
		Failed:              p.Failed,
	}, lines, nil
}

// onNodes is the allocations and the fleet of the nodes keep accepts (nil: all of them).
func onNodes(allocs []billing.Allocation, fleet *billing.Fleet, keep func(string) bool) ([]billing.Allocation, *billing.Fleet) {
	if keep == nil {
		return allocs, fleet
	}
	allocs = slices.DeleteFunc(allocs, func(a billing.Allocation) bool { return !keep(a.Target.Node) })
	maps.DeleteFunc(fleet.Instances, func(t billing.Target, _ pricebook.Instance) bool { return !keep(t.Node) })
	maps.DeleteFunc(fleet.GPUs, func(g billing.GPU, _ []billing.Interval) bool { return !keep(g.Node) })
	return allocs, fleet
}

// unallocatedByNode is, per node with priced capacity or a line, the list cost of its GPUs
// minus that of the lines on it: the node's share of the unallocated capacity, which the
// service stores per node (the nodes sum to the report's unallocated, up to float rounding).
// The GPUs are summed in order, so that a node's figure is the same to the last bit whichever
// replica computes it.
func unallocatedByNode(f *billing.Fleet, window billing.Interval, book *pricebook.PriceBook, lines []billing.Line) (map[string]float64, error) {
	gpus := slices.SortedFunc(maps.Keys(f.GPUs), func(a, b billing.GPU) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.Model, b.Model))
	})
	out := map[string]float64{}
	one := billing.NewFleet()
	for _, g := range gpus {
		clear(one.GPUs)
		one.GPUs[g] = f.GPUs[g]
		c, err := billing.CapacityListCost(one, window, book)
		if err != nil {
			return nil, fmt.Errorf("the capacity of GPU %s on node %s: %w", g.UUID, g.Node, err)
		}
		out[g.Node] += c
	}
	for _, l := range lines {
		out[l.Node] -= l.ListCost
	}
	return out, nil
}

// ownedNodes is the nodes of the presence that keep accepts (nil: every node).
func ownedNodes(p *store.Presence, keep func(string) bool) store.Nodes {
	if keep == nil {
		return store.Nodes{}
	}
	return store.OnlyNodes(slices.DeleteFunc(p.Nodes(), func(n string) bool { return !keep(n) }))
}

// presenceOf is the GPUs' presence for the window: the options' or read for it.
func presenceOf(ctx context.Context, conn store.Querier, o Options, window billing.Interval) (*store.Presence, error) {
	period, p := o.PresencePeriod(), o.Present
	if p == nil {
		return store.ReadPresence(ctx, conn, o.Samples, window, period)
	}
	if p.Period() != period || p.Source() != o.Samples {
		return nil, fmt.Errorf("the presence given was read from %s with a period of %s, the report is from %s with %s", p.Source(), p.Period(), o.Samples, period)
	}
	return p, nil
}

// withNeighbours sets each row's NoisyNeighbour and NoisyNeighbourShare from top (a tenant
// that never waited has no share).
func withNeighbours(r report.Report, top map[string]store.Neighbour) report.Report {
	r.Tenants = slices.Clone(r.Tenants)
	for i := range r.Tenants {
		n, ok := top[r.Tenants[i].Tenant]
		r.Tenants[i].NoisyNeighbour = n.Name
		if ok {
			r.Tenants[i].NoisyNeighbourShare = &n.Share
		}
	}
	return r
}

// ReportSeries is Report for each of the windows (their From and To replace o's), in order,
// each report's notes logged (LogNotes); it stops at the first window that fails, naming it.
func ReportSeries(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, windows []report.Window, o Options, logger *slog.Logger) (report.Series, error) {
	var series report.Series
	for _, w := range windows {
		o.From, o.To = w.Start, w.End
		res, err := Report(ctx, conn, book, o)
		LogNotes(ctx, logger, res.Report)
		if err != nil {
			return series, fmt.Errorf("attributing %s to %s: %w", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), err)
		}
		series = append(series, res.Report)
	}
	return series, nil
}

// LogNotes logs each of the report's notes once, as a warning.
func LogNotes(ctx context.Context, logger *slog.Logger, rep report.Report) {
	for _, n := range rep.Notes {
		logger.WarnContext(ctx, "attribution report note", "window_start", rep.WindowStart, "window_end", rep.WindowEnd, "note", n)
	}
}

// CheckFleetPriced fails (a usage error: the price book is wrong) naming every GPU model
// sampled in the last since that the price book does not price, and every tier of the
// allocations billed in it that the price book lacks: what reports attribute as unpriced.
func CheckFleetPriced(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, since time.Duration) error {
	from := time.Now().Add(-since)
	models, err := store.FleetModels(ctx, conn, from)
	if err != nil {
		return err
	}
	tiers, err := store.FleetTiers(ctx, conn, from)
	if err != nil {
		return err
	}
	var errs []error
	if err := book.CheckModels(models); err != nil {
		errs = append(errs, err)
	}
	var unknown []string
	for _, t := range tiers {
		if _, ok := book.Tiers[t]; !ok {
			unknown = append(unknown, t)
		}
	}
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("%w(s) %q of the fleet's allocations: the price book's tiers are %s", pricebook.ErrUnknownTier, unknown, strings.Join(slices.Sorted(maps.Keys(book.Tiers)), ", ")))
	}
	if len(errs) > 0 {
		return usage.Wrap(errors.Join(errs...))
	}
	return nil
}

// CheckFleetPricedAt is CheckFleetPriced on the ClickHouse at dsn (`pricebook check
// --clickhouse.dsn`).
func CheckFleetPricedAt(ctx context.Context, dsn string, book *pricebook.PriceBook, since time.Duration) error {
	conn, err := migrations.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	return CheckFleetPriced(ctx, conn, book, since)
}
