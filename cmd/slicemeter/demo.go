package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/collector"
	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/exporter/service"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

type demoCmd struct {
	stdout     io.Writer
	scenario   *string
	fast       *bool
	reportPath *string
	format     *string
	brokers    *string
	dsn        *string
	partitions *int
	flush      *time.Duration
	simStart   *string
	web        *web.FlagConfig
}

func newDemoCmd(app *kingpin.Application, stdout io.Writer) *demoCmd {
	c := app.Command("demo", "Run the whole pipeline on a simulated fleet: exporter → Kafka → collector → ClickHouse → attribution → report.")
	return &demoCmd{
		stdout:     stdout,
		scenario:   c.Flag("scenario", "Scenario file (the simulated fleet, its tenants and prices).").Required().String(),
		fast:       c.Flag("fast", "Run the simulated clock as fast as the pipeline allows; end when everything is attributed.").Bool(),
		reportPath: c.Flag("report", "Write the report to this file instead of stdout.").String(),
		format:     c.Flag("format", "Report format.").Default("csv").Enum("csv", "json"),
		brokers:    c.Flag("kafka.brokers", "Kafka brokers; empty runs an embedded broker (kfake) in the process.").String(),
		dsn:        c.Flag("clickhouse.dsn", "ClickHouse DSN; empty starts a ClickHouse server from PATH in a temporary directory.").String(),
		partitions: c.Flag("kafka.partitions", "Partitions of the topics when they have to be created.").Default("4").Int(),
		flush:      c.Flag("kafka.flush-interval", "Sampled time per SampleBatch (default: 1s, 10s with --fast).").Duration(),
		simStart:   c.Flag("sim.start", "Move the scenario to start at this time (RFC 3339, or now): a live demo then has wall-clock timestamps that Prometheus and the attribution service's trailing window see.").String(),
		web:        kingpinflag.AddFlags(c, ":9835"),
	}
}

func (c *demoCmd) run(ctx context.Context, logger *slog.Logger) error {
	began := time.Now()
	sc, err := service.LoadScenario(*c.scenario)
	if err != nil {
		return err
	}
	if *c.simStart != "" {
		start := time.Now().UTC().Truncate(time.Second)
		if *c.simStart != "now" {
			if start, err = parseTime("--sim.start", *c.simStart); err != nil {
				return err
			}
		}
		sc.Start = start
	}
	prices := pricebook.FromScenario(sc)
	out := c.stdout
	if *c.reportPath != "" {
		f, err := os.Create(*c.reportPath)
		if err != nil {
			return usage.Errorf("--report: %v", err)
		}
		defer f.Close()
		out = f
	}

	// Kafka: the given brokers, or an embedded one.
	brokers := kafkaconn.ParseBrokers(*c.brokers)
	if len(brokers) == 0 {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return fmt.Errorf("starting the embedded Kafka broker: %w", err)
		}
		defer cluster.Close()
		brokers = cluster.ListenAddrs()
		logger.Info("embedded Kafka broker (kfake) started", "brokers", brokers)
	}
	if err := kafkaconn.EnsureTopics(ctx, brokers, *c.partitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		return err
	}

	// ClickHouse: the given DSN, or a server started here.
	dsn := *c.dsn
	if dsn == "" {
		ch, err := local.StartClickHouse(ctx, local.ClickHouseOptions{})
		if err != nil {
			return fmt.Errorf("starting a local ClickHouse server (or pass --clickhouse.dsn): %w", err)
		}
		defer func() {
			if err := ch.Close(); err != nil {
				logger.Warn("stopping the local ClickHouse server", "err", err)
			}
		}()
		dsn = ch.DSN("slicemeter")
		logger.Info("local ClickHouse server started", "addr", ch.Addr())
	}
	conn, err := openMigrated(ctx, dsn, logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	servicesUp := time.Now()

	reg := webserver.NewRegistry()
	var ready atomic.Bool
	webCtx, stopWeb := context.WithCancel(ctx)
	defer stopWeb()
	webErr := webserver.Serve(webCtx, webserver.Options{Flags: c.web, Registry: reg, Ready: &ready, Logger: logger})

	// Collector, in the background until everything produced is stored.
	col, err := collector.New(collector.Config{Brokers: brokers, GroupID: "slicemeter-demo-" + sc.Name, FlushRows: 200000, FlushInterval: 100 * time.Millisecond}, conn, reg, logger)
	if err != nil {
		return err
	}
	colCtx, stopCollector := context.WithCancel(ctx)
	defer stopCollector()
	colDone := make(chan error, 1)
	go func() { colDone <- col.Run(colCtx) }()

	// Allocations, as a scheduler would announce them.
	events := sc.AllocationEvents()
	if err := publishAllocations(ctx, brokers, events, logger); err != nil {
		return err
	}

	// Exporter.
	flush := *c.flush
	if flush <= 0 {
		flush = time.Second
		if *c.fast {
			flush = 10 * time.Second
		}
	}
	exp, err := service.New(service.Config{Source: "sim", Scenario: sc, Fast: *c.fast, FlushInterval: flush,
		Brokers: brokers, Partitions: *c.partitions, Ready: &ready, Embedded: true}, reg, logger)
	if err != nil {
		return err
	}
	defer exp.Close()
	logger.Info("demo running", "scenario", sc.Name, "instances", exp.Instances(), "window", sc.Duration, "interval", sc.Interval, "fast", *c.fast)
	produced, err := exp.Run(ctx)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	sampled := time.Now()

	// Wait until the collector has stored everything that was produced.
	if err := waitStored(ctx, col, uint64(produced), uint64(len(events)), colDone, webErr); err != nil {
		return err
	}
	stored := time.Now()
	stopCollector()
	if err := <-colDone; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("collector: %w", err)
	}

	res, err := attribution.Report(ctx, conn, prices, attribution.Options{From: sc.Start, To: sc.End()})
	attribution.LogNotes(ctx, logger, res.Report)
	if err != nil {
		return fmt.Errorf("attributing: %w", err)
	}
	if err := writeReport(out, res.Report, *c.format); err != nil {
		return err
	}
	done := time.Now()
	logger.Info("demo finished",
		"samples", produced,
		"wall", done.Sub(began).Round(time.Millisecond),
		"samples_per_second_end_to_end", int(float64(produced)/stored.Sub(servicesUp).Seconds()),
		"startup", servicesUp.Sub(began).Round(time.Millisecond),
		"sample_and_publish", sampled.Sub(servicesUp).Round(time.Millisecond),
		"drain_to_clickhouse", stored.Sub(sampled).Round(time.Millisecond),
		"attribution", done.Sub(stored).Round(time.Millisecond))
	return nil
}

func publishAllocations(ctx context.Context, brokers []string, events []*pb.AllocationEvent, logger *slog.Logger) error {
	w := kafkaconn.NewWriter(brokers, pb.TopicAllocations, logger)
	defer w.Close()
	msgs := make([]kafka.Message, 0, len(events))
	for _, e := range events {
		v, err := proto.Marshal(e)
		if err != nil {
			return fmt.Errorf("encoding allocation %s: %w", e.AllocationId, err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(e.Tenant), Value: v})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("publishing %d allocations to %s: %w", len(msgs), pb.TopicAllocations, err)
	}
	return nil
}

// waitStored polls the collector until it stored at least the produced samples and allocations.
func waitStored(ctx context.Context, col *collector.Collector, samples, allocations uint64, colDone <-chan error, webErr <-chan error) error {
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
