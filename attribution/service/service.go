// Package service is the attribution service: it attributes every closed minute of every
// allocation as it closes and stores the result in ClickHouse (table attribution_minutes:
// tenant × allocation × minute), recomputing the minutes that late samples or allocations
// touch within a lookback (Runner); it serves the latest trailing window and what the minutes
// add as SLA metrics on /metrics, and the HTTP API on /api/v1.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/attribution/api/auth"
	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/statement"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/internal/lograte"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"
	"github.com/slicemeter/slicemeter/schemas/audit"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Config is what the service runs with.
type Config struct {
	DSN     string // ClickHouse, native protocol
	Cluster string // the ClickHouse cluster used through its Distributed tables; empty: one server
	Book    *pricebook.PriceBook
	// Interval: how often closed minutes are attributed and the trailing window refreshed.
	Interval time.Duration
	// Window: the trailing window that the slicemeter_tenant_* gauges describe.
	Window time.Duration
	Passes
	// CloseAfter: each billing period is closed (attribution/period, from the stored minutes)
	// this long after its end; 0: never by the service.
	CloseAfter time.Duration
	// Export: where the FOCUS files of each period closed are written (nil or no Dir: none).
	Export *focus.MonthlyExport
	Web    *webserver.Flags // where /metrics and the API are served
	// AuthFile: the API's tokens and JWT settings (package auth); without it the API refuses
	// to start unless InsecureNoAuth makes every caller an operator.
	AuthFile       string
	InsecureNoAuth bool
	// Reports bound the API's report requests (cost, concurrency); nil: api's defaults.
	Reports *api.ReportLimits
	// FleetTenantLimit is the most tenants a host should carry (the fleet report's and
	// gauges' limit); 0: fleet.DefaultMaxTenantsPerHost.
	FleetTenantLimit int
}

// Validate fails, with a usage error, for a config the service cannot run with.
func (c Config) Validate() error {
	if c.CloseAfter < 0 {
		return usage.Errorf("--billing.close-after %s: expected a duration ≥ 0 (0: the service closes no period)", c.CloseAfter)
	}
	if c.Interval <= 0 || c.Window <= 0 || c.Lookback < 0 || c.Delay < 0 || c.Backfill < 0 || c.MaxMinutes <= 0 {
		return usage.Errorf("--attribution.interval, --attribution.window and --attribution.max-minutes must be > 0; delay, lookback and backfill ≥ 0")
	}
	if c.FleetTenantLimit != 0 {
		if err := fleet.CheckTenantLimit(c.FleetTenantLimit); err != nil {
			return err
		}
	}
	if c.Reports != nil {
		if err := c.Reports.Check(); err != nil {
			return usage.Wrap(err)
		}
	}
	if c.Presence != 0 {
		if err := store.CheckPresence(c.Presence); err != nil {
			return usage.Errorf("--attribution.presence: %w", err)
		}
	}
	switch {
	case c.AuthFile == "" && !c.InsecureNoAuth:
		return usage.Errorf("the API on /api/v1 needs authentication: give --api.auth-file FILE (tokens, JWT), or --api.insecure-no-auth to let anyone who reaches it act as an operator")
	case c.AuthFile != "" && c.InsecureNoAuth:
		return usage.Errorf("--api.auth-file %s and --api.insecure-no-auth: expected one of them", c.AuthFile)
	}
	return nil
}

// authorizer is the API's: from the auth file, or AllowAll (warned once) without one.
func (c Config) authorizer(logger *slog.Logger) (api.Authorizer, error) {
	if c.InsecureNoAuth {
		logger.Warn("the API on /api/v1 is served without authentication (--api.insecure-no-auth): anyone who reaches it reads every tenant and writes allocations")
		return api.AllowAll{}, nil
	}
	return auth.Load(c.AuthFile, logger)
}

// Run runs the service until ctx ends (nil then) or serving fails. The metrics are registered
// in reg and served from it.
func Run(ctx context.Context, cfg Config, reg *prometheus.Registry, logger *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	authz, err := cfg.authorizer(logger)
	if err != nil {
		return err
	}
	if a, ok := authz.(*auth.Authenticator); ok {
		if err := a.Register(reg); err != nil {
			return fmt.Errorf("registering the API authentication metrics: %w", err)
		}
	}
	// Ending the passes before the connection closes, however Run ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := migrations.Open(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := migrations.RequireClusterSettings(ctx, conn, cfg.Cluster); err != nil {
		return err
	}
	// A model or tier the price book lacks does not stop the service: what it covers is
	// attributed as unpriced (slicemeter_attribution_unpriced_seconds_total); say so at start.
	switch err := attribution.CheckFleetPriced(ctx, conn, cfg.Book, max(cfg.Window, cfg.Backfill, 24*time.Hour)); {
	case usage.Is(err):
		logger.WarnContext(ctx, "the price book does not price all of the fleet: that part is attributed as unpriced, left out of the money", "err", err)
	case err != nil:
		logger.WarnContext(ctx, "could not check that the price book prices the fleet", "err", err)
	}
	s := &service{cfg: cfg, conn: conn, logger: logger, logs: lograte.New(logger, time.Minute), sla: newSLAMetrics(reg, cfg.Book),
		progress: progress{logger: logger}, now: time.Now}
	passes := cfg.Passes
	if passes.OpenFrom == nil {
		if passes.OpenFrom, err = openFrom(ctx, conn, cfg.Book, cfg.CloseAfter); err != nil {
			return err
		}
	}
	s.runner = NewRunner(conn, cfg.Book, passes, s.sla, logger)
	// Registered whether the service closes periods or not, so that dashboards and alerts see 0.
	closeMetrics := newCloseMetrics(reg)
	if cfg.CloseAfter > 0 {
		s.closing = newClosing(s.closer(), cfg.CloseAfter, cfg.Interval, s.runner, closeMetrics, logger)
	}
	s.sla.watchLag(reg, s.runner)
	watchOwed(reg, s.runner)
	s.fleet = newFleetMetrics(reg, s.tenantLimit())
	s.advice = newAdviceMetrics(reg)
	s.handClosed = make(chan period.Month, handClosedQueue)
	srv := &api.Server{
		Store:  allocations.NewStore(conn),
		Report: s.report,
		Fleet:  s.fleetReport,
		Ready:  func() time.Time { return time.Now().Add(-cfg.Delay) },
		Advice: func(ctx context.Context, o advice.Options) (advice.Result, error) {
			o.Samples = store.MinuteRollup // a week of a large fleet stays cheap
			return advice.Compute(ctx, conn, cfg.Book, o)
		},
		Auth:    authz,
		Metrics: allocations.NewMetrics(reg),
		Tiers:   cfg.Book.Tiers,
		Zone:    cfg.Book.Zone(),
		Logger:  logger,
		Limits:  cfg.Reports,
		Audit:   func(ctx context.Context, q audit.Query) ([]audit.Entry, error) { return audit.List(ctx, conn, q) },
		Periods: periods{conn: conn, closer: s.closer(), owe: s.oweHandClose},
		// A month from the stored minutes: from the samples it is 32 reports of raw samples.
		Statement:        statement.Page(s.statementSource()),
		NotYetRetryAfter: cfg.Interval,
	}
	if cfg.Export != nil {
		srv.Issuer = focus.IssuerNamed(cfg.Export.Issuer)
	}
	// Ready once a trailing window is attributed, and while ClickHouse answers its pings.
	ch := &pinger{ping: conn.Ping, logger: logger}
	go ch.run(ctx, pingEvery)
	// The advice reads a week of the fleet (seconds for 1000 instances, minutes for 50,000): in
	// the pass it would hold the minutes' attribution back once an hour.
	go s.adviseLoop(ctx, min(cfg.Interval, adviceRetryEmpty))
	webErr := webserver.Serve(ctx, webserver.Options{Flags: cfg.Web, Registry: reg, Ready: &s.ready, Missing: ch.missing, Logger: logger,
		Routes: []func(*http.ServeMux){srv.Register}, BearerPaths: []string{"/api/v1/"}})
	return webserver.RunServing(webErr, func() error {
		tick := time.NewTicker(cfg.Interval)
		defer tick.Stop()
		for {
			behind := s.pass(ctx)
			// Minutes waiting (a backfill, a recomputation): the next pass at once, attributing
			// only, until the interval's full pass is due.
			for behind && ctx.Err() == nil && len(tick.C) == 0 {
				behind = s.attribute(ctx).Behind
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	})
}

// service is one running attribution service.
type service struct {
	cfg     Config
	conn    driver.Conn
	runner  *Runner
	sla     *slaMetrics
	fleet   *fleetMetrics
	advice  *adviceMetrics
	ready   atomic.Bool // once a trailing window is attributed
	logger  *slog.Logger
	logs    *lograte.Limiter // the trailing window's notes recur at every pass
	closing *closing         // nil: the service closes no period
	// progress logs the passes: backfill and catch-up progress, then a heartbeat (progress.go).
	progress progress
	// now is the service's clock (time.Now; the runner's own is set alike): the pass's
	// benchmark runs passes over generated data at a time of its choosing.
	now func() time.Time
	// handClosed carries the billing periods that a close by hand (the API's) found with
	// minutes never attributed to the next pass, which records them as owed (Runner.Owe is not
	// safe during a pass) so that the passes attribute them; nil: none is taken.
	handClosed chan period.Month
}

// handClosedQueue bounds the periods waiting in handClosed; a close asked while it is full is
// asked again by its caller (it answers 409 every time until the minutes are attributed).
const handClosedQueue = 16

// oweHandClose queues a period that a close by hand found not all attributed.
func (s *service) oweHandClose(m period.Month) {
	select {
	case s.handClosed <- m:
	default:
	}
}

// oweHandClosed records, between passes, the minutes never attributed of the periods closed by
// hand since the last pass, so that the passes attribute them as they do for the automatic
// close (stored.ReasonPeriodClose).
func (s *service) oweHandClosed(ctx context.Context) {
	for {
		var m period.Month
		select {
		case m = <-s.handClosed:
		default:
			return
		}
		start, end := m.Bounds(s.cfg.Book.Zone())
		n, err := s.runner.Owe(ctx, start, end, stored.ReasonPeriodClose, "billing period "+m.String()+" closed by hand", s.now())
		if err != nil {
			s.logger.ErrorContext(ctx, "could not record the minutes a billing period closed by hand needs", "period", m.String(), "err", err)
			continue
		}
		if n > 0 {
			s.logger.InfoContext(ctx, "a billing period closed by hand has minutes never attributed: the service attributes them now, oldest first; close it again then",
				"period", m.String(), "minutes", n)
		}
	}
}

// report answers the API's report requests.
func (s *service) report(ctx context.Context, q api.ReportQuery) (report.Report, error) {
	res, err := attribution.Report(ctx, s.conn, s.cfg.Book, attribution.Options{From: q.From, To: q.To, Samples: s.cfg.Samples, FromMinutes: q.FromMinutes, Neighbours: q.Neighbours,
		Presence: s.cfg.Presence, Lines: q.Lines})
	s.logNotes(ctx, res.Report)
	return res.Report, err
}

// logNotes logs a report the API computed with its notes, through the limiter: clients ask
// for the same windows again and again, and their notes would flood the log. One line sums up
// a report's notes (how many, the first few: a report can have 100,000); the next ones in the
// minute are counted.
func (s *service) logNotes(ctx context.Context, rep report.Report) {
	if len(rep.Notes) == 0 {
		return
	}
	s.logs.Log(ctx, time.Now(), slog.LevelWarn, "report_notes", "attribution report notes", "window_start", rep.WindowStart, "window_end", rep.WindowEnd,
		"notes", lograte.Few(rep.Notes))
}

func (s *service) tenantLimit() int {
	if s.cfg.FleetTenantLimit == 0 {
		return fleet.DefaultMaxTenantsPerHost
	}
	return s.cfg.FleetTenantLimit
}

// fleetReport answers the API's fleet requests, from the stored minutes.
func (s *service) fleetReport(ctx context.Context, q api.FleetQuery) ([]fleet.Row, error) {
	return fleet.Compute(ctx, s.conn, s.cfg.Book, fleet.Options{From: q.From, To: q.To, By: q.By, Presence: s.cfg.Presence, TenantLimit: s.tenantLimit()})
}

// updateFleet refreshes the fleet gauges: the trailing window's whole minutes up to the last
// one attributed.
func (s *service) updateFleet(ctx context.Context) {
	to := s.runner.Done().Truncate(time.Minute)
	from := to.Add(-s.cfg.Window).Truncate(time.Minute)
	if to.IsZero() || !from.Before(to) {
		return
	}
	if err := s.fleet.update(ctx, s.conn, s.cfg.Book, from, to, s.cfg.Presence); err != nil {
		s.logs.Log(ctx, time.Now(), slog.LevelError, "fleet", "computing the fleet gauges failed", "from", from, "to", to, "err", err)
	}
}

// attribute runs one pass of the runner: the closed minutes into ClickHouse.
func (s *service) attribute(ctx context.Context) Pass {
	began := time.Now()
	p, err := s.runner.Once(ctx)
	s.sla.passDuration.Observe(time.Since(began).Seconds())
	s.progress.pass(ctx, time.Now(), p, err, s.now().Add(-s.cfg.Delay).Truncate(time.Minute))
	s.sla.computeErrs.WithLabelValues(scopeMinute).Add(float64(len(p.Failed)))
	if err != nil {
		s.sla.errors.Inc()
		s.logger.Error("attributing minutes failed", "from", p.From, "to", p.To, "err", err)
		p.Behind = false // the next pass waits for the interval
	} else if p.Fresh+p.Recomputed > 0 {
		s.logger.Debug("attributed minutes", "from", p.From, "to", p.To, "fresh", p.Fresh, "recomputed", p.Recomputed)
	}
	return p
}

// pass attributes the closed minutes into ClickHouse, closes the periods due, then computes the
// trailing window for the gauges. It says whether minutes are still waiting (Pass.Behind).
func (s *service) pass(ctx context.Context) (behind bool) {
	s.oweHandClosed(ctx)
	p := s.attribute(ctx)
	behind = p.Behind
	if s.closing != nil {
		s.closing.run(ctx)
	}
	s.updateFleet(ctx)
	// The gauges are of the replica's nodes (Shards), as its minutes and counters are: replicas
	// share the trailing window's work as they share the minutes'.
	nodes, owned := s.runner.Nodes()
	if !owned {
		return behind
	}
	// Whole seconds: the window's edges are what the report prints.
	to := s.now().UTC().Truncate(time.Second)
	began := time.Now()
	res, err := attribution.Report(ctx, s.conn, s.cfg.Book, attribution.Options{From: to.Add(-s.cfg.Window), To: to, Samples: windowSamples(s.cfg.Samples), Presence: s.cfg.Presence,
		Nodes: nodes, ColdStarts: s.runner.ColdStarts()})
	s.sla.duration.Observe(time.Since(began).Seconds())
	if err != nil && !errors.Is(err, attribution.ErrInvariants) {
		s.sla.errors.Inc()
		s.logger.Error("attribution failed", "window_end", to, "err", err)
		return behind
	}
	for _, n := range res.Report.Notes {
		s.logs.Log(ctx, to, slog.LevelWarn, "window_note", "attribution report note", "window_start", res.Report.WindowStart, "window_end", to, "note", n)
	}
	s.logs.Flush(ctx, to)
	s.sla.countViolations(res.Violations)
	for _, v := range res.Violations {
		s.logger.Error("attribution invariant violated", "window_end", to, "err", v)
	}
	s.sla.set(res.Report)
	s.ready.Store(true)
	return behind
}

// windowSamples is where the trailing window's report reads the samples: the per-minute rollup
// where the passes read the per-second one. Its whole minutes are 60 times fewer rows, and its
// partial minutes (the window's edges, allocations starting or ending inside a minute) are read
// from the per-second rollup, so the report is the same (the report paths are equal, tested on
// every public scenario): an hour of 10,000 instances per pass read 36M rows of samples_1s.
// Raw samples stay raw: an operator who chose them chose them for everything.
func windowSamples(passes store.Samples) store.Samples {
	if passes == store.SecondRollup {
		return store.MinuteRollup
	}
	return passes
}

// closer closes billing periods from the stored minutes, for the service and the API.
func (s *service) closer() period.Closer {
	return period.Closer{Conn: s.conn, Book: s.cfg.Book, Options: attribution.Options{FromMinutes: true, Delay: s.cfg.Delay},
		Export: s.cfg.Export, Logger: s.logger}
}

// periods serves the API's billing periods.
type periods struct {
	conn   driver.Conn
	closer period.Closer
	// owe is told of a period whose close found minutes never attributed (nil: nobody).
	owe func(period.Month)
}

func (p periods) List(ctx context.Context) ([]period.Closed, error) { return period.List(ctx, p.conn) }

func (p periods) Close(ctx context.Context, m period.Month, now time.Time) (period.Closed, error) {
	return p.owed(m)(p.closer.Close(ctx, m, now))
}

// CloseFOCUS closes the period with its FOCUS files in version v (the API's focus_version=).
func (p periods) CloseFOCUS(ctx context.Context, m period.Month, now time.Time, v focus.Version) (period.Closed, error) {
	return p.owed(m)(p.closer.WithFOCUSVersion(v).Close(ctx, m, now))
}

// owed passes a close's result on; when the close found minutes of m never attributed (the
// service started after the period, or its earlier minutes were never stored), it has the
// passes attribute them and says so: without it the period could never be closed from the
// stored minutes while the automatic close is off.
func (p periods) owed(m period.Month) func(period.Closed, error) (period.Closed, error) {
	return func(c period.Closed, err error) (period.Closed, error) {
		if p.owe == nil || !errors.Is(err, stored.ErrNotAttributed) {
			return c, err
		}
		p.owe(m)
		return c, fmt.Errorf("%w; the service attributes the period's missing minutes now, oldest first (slicemeter_attribution_backfill_seconds says how much is left): close it again once they are", err)
	}
}
