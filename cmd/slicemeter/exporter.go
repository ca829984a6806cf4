package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/publish"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/exporter/snapshot"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

type exporterCmd struct {
	source        *string
	scenario      *string
	node          *string
	fast          *bool
	brokers       *string
	flushInterval *time.Duration
	partitions    *int
	web           *web.FlagConfig
}

func newExporterCmd(app *kingpin.Application) *exporterCmd {
	c := app.Command("exporter", "Sample every GPU, MIG and vGPU instance of a node; serve /metrics and stream every sample to Kafka.")
	return &exporterCmd{
		// nvml and replay sources arrive with the exporter issue; only the simulator exists yet.
		source:        c.Flag("source", "Where samples come from: sim (a scenario file).").Default("sim").String(),
		scenario:      c.Flag("scenario", "Scenario file for --source sim.").String(),
		node:          c.Flag("sim.node", "Simulate only this node of the scenario (default: every node).").String(),
		fast:          c.Flag("sim.fast", "Run the simulated clock as fast as possible instead of in real time.").Bool(),
		brokers:       c.Flag("kafka.brokers", "Kafka brokers (host:port,...); empty serves /metrics only.").String(),
		flushInterval: c.Flag("kafka.flush-interval", "How much sampled time goes into one SampleBatch per node.").Default("1s").Duration(),
		partitions:    c.Flag("kafka.partitions", "Partitions of the samples topic when it has to be created.").Default("4").Int(),
		web:           kingpinflag.AddFlags(c, ":9835"),
	}
}

func (c *exporterCmd) run(ctx context.Context, logger *slog.Logger) error {
	if *c.source != "sim" {
		return usage("--source %q: expected sim (the nvml and replay sources are not in this build)", *c.source)
	}
	sc, src, err := loadSim(*c.scenario, *c.node)
	if err != nil {
		return err
	}
	reg := newRegistry()
	var ready atomic.Bool
	webCtx, stopWeb := context.WithCancel(ctx)
	defer stopWeb()
	webErr := serveWeb(webCtx, c.web, reg, &ready, logger)

	sinks, closeSinks, err := exporterSinks(ctx, reg, kafkaconn.ParseBrokers(*c.brokers), *c.partitions, logger)
	if err != nil {
		return err
	}
	defer closeSinks()
	ready.Store(true)
	loop := simLoop(sc, src, *c.fast, *c.flushInterval, sinks, reg, logger)
	logger.Info("exporter sampling", "scenario", sc.Name, "nodes", src.Nodes(), "instances", src.Instances(), "interval", sc.Interval, "fast", *c.fast)
	return runServing(webErr, func() error {
		n, err := loop.Run(ctx)
		logger.Info("exporter finished", "samples", n)
		return err
	})
}

// loadSim loads a scenario for the sim source; every problem with it is a usage error.
func loadSim(path, node string) (*scenario.Scenario, *sim.Source, error) {
	if path == "" {
		return nil, nil, usage("--scenario is required with --source sim")
	}
	sc, err := scenario.Load(path)
	if err != nil {
		return nil, nil, usageError{err}
	}
	src, err := sim.New(sc, node)
	if err != nil {
		return nil, nil, usageError{err}
	}
	return sc, src, nil
}

// exporterSinks returns the Prometheus snapshot and, with brokers, the Kafka publisher.
func exporterSinks(ctx context.Context, reg *prometheus.Registry, brokers []string, partitions int, logger *slog.Logger) ([]exporter.Sink, func(), error) {
	snap := snapshot.New()
	reg.MustRegister(snap)
	sinks := []exporter.Sink{snap}
	if len(brokers) == 0 {
		return sinks, func() {}, nil
	}
	if err := kafkaconn.EnsureTopics(ctx, brokers, partitions, pb.TopicSamples); err != nil {
		return nil, nil, err
	}
	w := kafkaconn.NewWriter(brokers, "", logger)
	// A flush is one message per node, already a batch: send it at once rather than waiting
	// BatchTimeout for more messages that will not come.
	w.BatchSize = 1
	sinks = append(sinks, publish.New(w, pb.TopicSamples, reg, logger))
	return sinks, func() {
		if err := w.Close(); err != nil && !errors.Is(err, context.Canceled) {
			logger.Warn("closing the Kafka writer", "err", err)
		}
	}, nil
}

// simLoop samples the scenario's window, in real time (from now on) or as fast as possible.
func simLoop(sc *scenario.Scenario, src *sim.Source, fast bool, flush time.Duration, sinks []exporter.Sink, reg prometheus.Registerer, logger *slog.Logger) *exporter.Loop {
	var clock exporter.Clock = exporter.RealClock{Offset: time.Since(sc.Start)}
	if fast {
		clock = exporter.FastClock{}
	}
	return &exporter.Loop{
		Source: src, Clock: clock, Sinks: sinks,
		Start: sc.Start, End: sc.End(), Interval: sc.Interval, FlushEvery: flush,
		Logger: logger, Metrics: exporter.NewLoopMetrics(reg),
	}
}
