// Package demo runs the whole pipeline on a simulated fleet in one process: the collector
// service, the scheduler's announcements of the scenario's allocations, the exporter service on
// the simulated fleet, then the one report — the same services the separate commands run, over
// an embedded Kafka broker and a ClickHouse server of its own unless it is given both.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/request"
	attrsvc "github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/collector"
	collectorsvc "github.com/slicemeter/slicemeter/collector/service"
	"github.com/slicemeter/slicemeter/deploy/local"
	exportersvc "github.com/slicemeter/slicemeter/exporter/service"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/redact"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// Config is what the demo's flags set.
type Config struct {
	ScenarioPath  string
	SimStart      string        // move the scenario to start then: RFC 3339 or "now"; empty: as written
	Fast          bool          // the simulated clock as fast as the pipeline allows
	FlushInterval time.Duration // sampled time per SampleBatch; 0: 1s, 10s with Fast
	Report        io.Writer     // where the report goes, unless ReportPath names a file
	ReportPath    string
	Format        string                   // of the report: csv or json
	Brokers       []string                 // Kafka; none: an embedded broker (kfake)
	Kafka         kafkaconn.SecurityConfig // TLS and SASL to Brokers; the embedded broker is plaintext
	DSN           string                   // ClickHouse; empty: a server started in a temporary directory
	Partitions    int                      // of the topics when they have to be created
	Web           *webserver.Flags
	// StoreMinutes stores the attribution minutes of the scenario's window into the database DSN
	// names, as the attribution service's passes do, so that report --from-minutes, fleet and
	// statement work on it afterwards. Off, or with the demo's own ClickHouse (removed at exit):
	// they are left to an attribution service started on the database later.
	StoreMinutes bool
}

// Run runs the demo: it starts what cfg does not name, runs the services on the scenario and
// writes the report of the scenario's window to cfg.Report. Bad input is a usage error.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	began := time.Now()
	sc, err := exportersvc.LoadScenario(cfg.ScenarioPath)
	if err != nil {
		return err
	}
	sc.Loop = false // the demo reports the scenario's window: it plays a looping scenario once
	if err := exportersvc.MoveScenario(sc, cfg.SimStart, cfg.Fast, "--fast"); err != nil {
		return err
	}
	out := cfg.Report
	if cfg.ReportPath != "" {
		f, err := os.Create(cfg.ReportPath)
		if err != nil {
			return usage.Errorf("--report: %v", err)
		}
		defer f.Close()
		out = f
	}
	sec, err := cfg.Kafka.Load()
	if err != nil {
		return err
	}
	if len(cfg.Brokers) == 0 && sec.Enabled() {
		return usage.Errorf("--kafka.tls.* and --kafka.sasl.* need --kafka.brokers: the embedded broker is plaintext")
	}
	brokers, dsn, stopLocal, err := cfg.localServices(ctx, logger)
	if err != nil {
		return err
	}
	defer stopLocal()

	reg := webserver.NewRegistry()
	var ready atomic.Bool
	webCtx, stopWeb := context.WithCancel(ctx)
	defer stopWeb()
	webErr := webserver.Serve(webCtx, webserver.Options{Flags: cfg.Web, Registry: reg, Ready: &ready, Logger: logger})

	col, err := collectorsvc.New(ctx, collectorsvc.Config{Brokers: strings.Join(brokers, ","), Kafka: cfg.Kafka, Partitions: cfg.Partitions, DSN: dsn,
		Collector: collector.Config{GroupID: "slicemeter-demo-" + sc.Name, FlushRows: 200000, FlushInterval: 100 * time.Millisecond,
			Book: sc.Book}}, reg, logger)
	if err != nil {
		return err
	}
	defer col.Close()
	servicesUp := time.Now()
	colCtx, stopCollector := context.WithCancel(ctx)
	defer stopCollector()
	colDone := make(chan error, 1)
	go func() { colDone <- col.Run(colCtx) }()

	// Allocations, as a scheduler would announce them.
	events := sc.AllocationEvents()
	if err := allocations.Announce(ctx, kafkaconn.Cluster{Brokers: brokers, Security: sec}, events, logger); err != nil {
		return err
	}

	flush := cfg.FlushInterval
	if flush <= 0 {
		flush = time.Second
		if cfg.Fast {
			flush = 10 * time.Second
		}
	}
	exp, err := exportersvc.New(exportersvc.Config{Source: "sim", Scenario: sc, Fast: cfg.Fast, FlushInterval: flush,
		Brokers: brokers, Kafka: cfg.Kafka, Partitions: cfg.Partitions, Ready: &ready}, reg, logger)
	if err != nil {
		return err
	}
	defer exp.Close()
	produced, err := exp.Run(ctx)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	sampled := time.Now()

	if err := waitStored(ctx, col, uint64(produced), uint64(len(events)), colDone, webErr); err != nil {
		return err
	}
	stored := time.Now()
	stopCollector()
	if err := <-colDone; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("collector: %w", err)
	}

	// The attribution minutes, only into a database that outlives the demo: its own ClickHouse
	// is removed at exit, and the minutes cost about as long as the rest of a short demo.
	var minutes int
	storing := time.Now()
	if cfg.StoreMinutes && cfg.DSN != "" {
		if minutes, err = storeMinutes(ctx, col.Conn(), sc, logger); err != nil {
			return err
		}
	}
	attributed := time.Now()
	// Every sample of the simulated window is stored by now, even where --sim.start put the
	// window ahead of the wall clock (a fast live demo): its end is the demo's present.
	res, err := attribution.Report(ctx, col.Conn(), sc.Book, attribution.Options{From: sc.Start, To: sc.End(),
		Now: later(time.Now(), sc.End()), Delay: -1})
	attribution.LogNotes(ctx, logger, res.Report)
	if err != nil {
		return fmt.Errorf("attributing: %w", err)
	}
	f, ok := request.Lookup(cfg.Format)
	if !ok || f.Write == nil {
		return usage.Errorf("report format %q: expected %s", cfg.Format, strings.Join(request.ReportFormats(), " or "))
	}
	if err := f.Write(out, report.Series{res.Report}, report.ByTenant); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	done := time.Now()
	logger.Info("demo finished",
		"samples", produced,
		"wall", done.Sub(began).Round(time.Millisecond),
		"samples_per_second_end_to_end", int(float64(produced)/stored.Sub(servicesUp).Seconds()),
		"startup", servicesUp.Sub(began).Round(time.Millisecond),
		"sample_and_publish", sampled.Sub(servicesUp).Round(time.Millisecond),
		"drain_to_clickhouse", stored.Sub(sampled).Round(time.Millisecond),
		"store_minutes", attributed.Sub(storing).Round(time.Millisecond),
		"attribution", done.Sub(attributed).Round(time.Millisecond))
	cfg.sayWhatsNext(logger, dsn, sc, minutes)
	return nil
}

// storeMinutes runs the attribution service's passes over the scenario's window, with the
// scenario's price book, until every minute of it is stored (attribution_minutes, the hourly
// roll-ups, the book they were priced with), as a service started on the database would have.
// It returns how many minutes it stored.
func storeMinutes(ctx context.Context, conn driver.Conn, sc *scenario.Scenario, logger *slog.Logger) (int, error) {
	end := sc.End().Truncate(time.Minute)
	passes := attrsvc.DefaultPasses
	passes.Delay, passes.Lookback = 0, 0 // every sample is stored: the window's end is closed
	passes.Backfill = end.Sub(sc.Start.Truncate(time.Minute))
	passes.MaxRecompute = max(passes.MaxRecompute, passes.Backfill)
	runner := attrsvc.NewRunner(conn, sc.Book, passes, nil, logger)
	runner.SetClock(func() time.Time { return end })
	stored := 0
	for {
		p, err := runner.Once(ctx)
		if err != nil {
			return stored, fmt.Errorf("storing the attribution minutes of %s to %s: %w", sc.Start.Format(time.RFC3339), end.Format(time.RFC3339), err)
		}
		if len(p.Failed) > 0 {
			return stored, fmt.Errorf("storing the attribution minutes: %d minutes failed, the first: %w", len(p.Failed), p.Failed[0])
		}
		stored += p.Fresh + p.Recomputed
		if !p.From.Before(p.To) {
			break
		}
	}
	logger.Info("attribution minutes stored, as the attribution service would", "minutes", stored, "from", sc.Start, "to", end)
	return stored, nil
}

// sayWhatsNext tells where the demo's data is: a database the command line named keeps it, and
// the commands that read it; the demo's own ClickHouse is removed when it exits.
func (c Config) sayWhatsNext(logger *slog.Logger, dsn string, sc *scenario.Scenario, minutes int) {
	if c.DSN == "" {
		logger.Info("the demo's ClickHouse and its data are removed now; to keep them for report, fleet and statement, run the demo with --clickhouse.dsn")
		return
	}
	window := "--from " + sc.Start.Format(time.RFC3339) + " --to " + sc.End().Truncate(time.Minute).Format(time.RFC3339)
	base := " --clickhouse.dsn " + redact.DSN(dsn) + " --scenario " + c.ScenarioPath + " " + window
	if minutes == 0 {
		logger.Info("the demo's data stays in "+redact.DSN(dsn), "report", "slicemeter report"+base)
		return
	}
	logger.Info("the demo's data and attribution minutes stay in "+redact.DSN(dsn),
		"report", "slicemeter report --from-minutes"+base, "fleet", "slicemeter fleet"+base)
}

// localServices are the given Kafka brokers and ClickHouse, or an embedded broker (kfake) and a
// ClickHouse server started in a temporary directory; stop ends what was started.
func (c Config) localServices(ctx context.Context, logger *slog.Logger) (brokers []string, dsn string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	brokers, dsn = c.Brokers, c.DSN
	if len(brokers) == 0 {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, "", stop, fmt.Errorf("starting the embedded Kafka broker: %w", err)
		}
		stops = append(stops, cluster.Close)
		brokers = cluster.ListenAddrs()
		logger.Info("embedded Kafka broker (kfake) started", "brokers", brokers)
	}
	if dsn == "" {
		ch, err := local.StartClickHouse(ctx, local.ClickHouseOptions{})
		if err != nil {
			stop()
			return nil, "", func() {}, fmt.Errorf("starting a local ClickHouse server (or pass --clickhouse.dsn): %w", err)
		}
		stops = append(stops, func() {
			if err := ch.Close(); err != nil {
				logger.Warn("stopping the local ClickHouse server", "err", err)
			}
		})
		dsn = ch.DSN("slicemeter")
		logger.Info("local ClickHouse server started", "addr", ch.Addr())
	}
	return brokers, dsn, stop, nil
}

// waitStored polls the collector until it stored at least the produced samples and allocations.
func waitStored(ctx context.Context, col *collectorsvc.Service, samples, allocations uint64, colDone <-chan error, webErr <-chan error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Minute)
	for {
		s, a := col.Stored()
		if s >= samples && a >= allocations {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-colDone:
			return fmt.Errorf("collector stopped with %d of %d samples and %d of %d allocations stored: %v", s, samples, a, allocations, err)
		case err, ok := <-webErr:
			if ok && err != nil {
				return fmt.Errorf("serving /metrics: %w", err)
			}
			webErr = nil
		case <-deadline:
			return fmt.Errorf("timed out: %d of %d samples and %d of %d allocations stored", s, samples, a, allocations)
		case <-tick.C:
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
