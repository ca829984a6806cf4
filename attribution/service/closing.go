package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/internal/lograte"
)

// The automatic close of billing periods (README: "Billing periods"; attribution/README.md,
// "Automatic period close"). A close that cannot be made is never silent: it is counted by
// reason, the periods owed a close and how long the oldest has been due are gauges (alert
// SlicemeterBillingPeriodNotClosed), it is logged once per closeLogEvery per reason with a
// count, and retried with back-off. A close that needs minutes nobody attributed (before the
// first stored minute: the service started after the period, or an earlier month was closed
// by hand from the samples) makes the passes attribute them instead of waiting forever.

// Reasons of a failed automatic close (slicemeter_billing_close_failures_total{reason}).
const (
	closeNotAttributed = "not_attributed" // minutes of the period never attributed: the service now attributes them
	closeOwed          = "owed"           // a recomputation or backfill still owes minutes of the period
	closeRepricing     = "repricing"      // the stored minutes are attributed again with a changed price book
	closeError         = "error"          // anything else: the reason is in the log
)

// closeLogEvery is how often a kind of failed close is logged: the count of the others is on
// the next line.
const closeLogEvery = 10 * time.Minute

// closeBackoff bounds the retries of a failed close: from the pass interval, doubling, to this.
const closeBackoff = 30 * time.Minute

// backoff is when to try again after consecutive failures: min, 2·min, 4·min … up to max.
type backoff struct {
	min, max time.Duration
	failures int
	next     time.Time // zero: now
}

// due says whether an attempt may be made at now.
func (b *backoff) due(now time.Time) bool { return !now.Before(b.next) }

// fail records a failure at now and returns the wait before the next attempt.
func (b *backoff) fail(now time.Time) time.Duration {
	wait := b.min
	for i := 0; i < b.failures && wait < b.max; i++ {
		wait *= 2
	}
	wait = min(wait, b.max)
	b.failures++
	b.next = now.Add(wait)
	return wait
}

// reset forgets the failures: the next attempt may be made at once.
func (b *backoff) reset() { b.failures, b.next = 0, time.Time{} }

// closeMetrics are the automatic close's metrics, all present from the start.
type closeMetrics struct {
	failures *prometheus.CounterVec
	pending  prometheus.Gauge
	overdue  prometheus.Gauge
}

func newCloseMetrics(reg prometheus.Registerer) *closeMetrics {
	m := &closeMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_billing_close_failures_total",
			Help: "Automatic closes of a due billing period that did not happen, by reason (not_attributed, owed, repricing, error).",
		}, []string{"reason"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slicemeter_billing_close_pending_periods",
			Help: "Billing periods past their end plus --billing.close-after that are not closed yet (closes go in order: one that fails holds the later ones).",
		}),
		overdue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slicemeter_billing_close_overdue_seconds",
			Help: "How long the oldest billing period owed a close has been due (its end plus --billing.close-after), in seconds; 0 when none is.",
		}),
	}
	for _, r := range []string{closeNotAttributed, closeOwed, closeRepricing, closeError} {
		m.failures.WithLabelValues(r)
	}
	reg.MustRegister(m.failures, m.pending, m.overdue)
	return m
}

// closing closes the due billing periods from the stored minutes, pass after pass.
type closing struct {
	closer  period.Closer
	after   time.Duration
	runner  closingRunner
	metrics *closeMetrics
	logs    *lograte.Limiter
	logger  *slog.Logger
	retry   backoff
	now     func() time.Time
}

// closingRunner is what the close needs of the runner.
type closingRunner interface {
	Repricing() bool
	Owe(ctx context.Context, from, to time.Time, reason, what string, now time.Time) (int, error)
}

func newClosing(closer period.Closer, after, interval time.Duration, runner closingRunner, metrics *closeMetrics, logger *slog.Logger) *closing {
	return &closing{closer: closer, after: after, runner: runner, metrics: metrics, logger: logger,
		logs: lograte.New(logger, closeLogEvery), retry: backoff{min: max(interval, time.Second), max: closeBackoff}, now: time.Now}
}

// run closes what is due, unless the back-off says to wait; it returns the periods closed.
func (c *closing) run(ctx context.Context) []period.Closed {
	now := c.now()
	defer c.logs.Flush(ctx, now)
	due, err := period.Due(ctx, c.closer, c.after, now)
	if err != nil {
		c.failed(ctx, now, closeError, "could not read which billing periods are due to close", err)
		return nil
	}
	c.gauges(due, now)
	if len(due) == 0 {
		c.retry.reset()
		return nil
	}
	if !c.retry.due(now) {
		return nil
	}
	if c.runner.Repricing() {
		// A close now would bill part of the old prices, then correct them in the next.
		c.failed(ctx, now, closeRepricing, "no billing period is closed while the stored minutes are attributed again with the changed price book", nil,
			"period", due[0].String())
		return nil
	}
	closed, err := period.CloseDue(ctx, c.closer, c.after, now)
	for _, p := range closed {
		c.logger.InfoContext(ctx, "billing period closed", "period", p.Period.String(), "version", p.Version, "cost", p.Cost.StringFixed(6),
			"corrections", p.CorrectionCost.StringFixed(6))
	}
	var de *period.DueError
	switch {
	case err == nil:
		c.retry.reset()
	case errors.Is(err, period.ErrOwed):
		// The passes are attributing them (a recomputation, the holes, a backfill): wait.
		c.failed(ctx, now, closeOwed, "a billing period due is not closed while minutes of it are still to attribute; the service is attributing them", err,
			"period", periodOf(err))
	case errors.Is(err, stored.ErrNotAttributed) && errors.As(err, &de):
		start, end := de.Period.Bounds(c.closer.Book.Zone())
		n, oweErr := c.runner.Owe(ctx, start, end, stored.ReasonPeriodClose, "billing period "+de.Period.String()+" due to close", now)
		if oweErr != nil {
			c.failed(ctx, now, closeError, "could not record the minutes a billing period due to close needs", errors.Join(err, oweErr), "period", de.Period.String())
			break
		}
		if n > 0 {
			c.logger.InfoContext(ctx, "a billing period due to close has minutes never attributed: the service attributes them now, oldest first, and closes it then",
				"period", de.Period.String(), "minutes", n, "waiting", len(de.Waiting))
		}
		c.failed(ctx, now, closeNotAttributed, "a billing period due has minutes not attributed yet; the service is attributing them", err, "period", de.Period.String())
	default:
		c.failed(ctx, now, closeError, "closing a billing period failed", err, "period", periodOf(err))
	}
	if len(closed) > 0 || err != nil {
		if due, err := period.Due(ctx, c.closer, c.after, now); err == nil {
			c.gauges(due, now)
		}
	}
	return closed
}

// periodOf is the period a CloseDue error names, empty when none.
func periodOf(err error) string {
	var de *period.DueError
	if errors.As(err, &de) {
		return de.Period.String()
	}
	return ""
}

// failed counts a failed close, logs it once per closeLogEvery per reason (with how many were
// not logged since) and backs off.
func (c *closing) failed(ctx context.Context, now time.Time, reason, msg string, err error, args ...any) {
	c.metrics.failures.WithLabelValues(reason).Inc()
	wait := c.retry.fail(now)
	level := slog.LevelInfo
	switch reason {
	case closeError:
		level = slog.LevelError
	case closeNotAttributed:
		level = slog.LevelWarn
	}
	args = append(args, "retry_in", wait.String(), "consecutive_failures", c.retry.failures)
	if err != nil {
		args = append(args, "err", err)
	}
	c.logs.Log(ctx, now, level, "period_close_"+reason, msg, args...)
}

// gauges sets the periods owed a close and how long the oldest has been due.
func (c *closing) gauges(due []period.Month, now time.Time) {
	c.metrics.pending.Set(float64(len(due)))
	if len(due) == 0 {
		c.metrics.overdue.Set(0)
		return
	}
	_, end := due[0].Bounds(c.closer.Book.Zone())
	c.metrics.overdue.Set(max(0, now.Sub(end.Add(c.after)).Seconds()))
}
