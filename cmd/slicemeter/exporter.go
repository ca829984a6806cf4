package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/capture"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/exporter/promcollector"
	"github.com/slicemeter/slicemeter/exporter/publish"
	"github.com/slicemeter/slicemeter/exporter/replay"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/exporter/summary"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

type exporterCmd struct {
	source        *string
	scenario      *string
	node          *string
	fast          *bool
	nodeName      *string
	library       *string
	interval      *time.Duration
	duration      *time.Duration
	record        *string
	replay        *string
	replayFast    *bool
	summary       *string
	brokers       *string
	flushInterval *time.Duration
	partitions    *int
	spoolDir      *string
	spoolMax      *int64
	web           *web.FlagConfig
}

func newExporterCmd(app *kingpin.Application) *exporterCmd {
	c := app.Command("exporter", "Sample every GPU, MIG and vGPU instance of a node; serve /metrics and stream every sample to Kafka.")
	host, _ := os.Hostname()
	return &exporterCmd{
		source:        c.Flag("source", "Where samples come from: nvml (this node's GPUs), sim (a scenario file) or replay (a capture file).").Default("sim").String(),
		scenario:      c.Flag("scenario", "Scenario file for --source sim.").String(),
		node:          c.Flag("sim.node", "Simulate only this node of the scenario (default: every node).").String(),
		fast:          c.Flag("sim.fast", "Run the simulated clock as fast as possible instead of in real time.").Bool(),
		nodeName:      c.Flag("node", "Node name in samples for --source nvml.").Default(host).String(),
		library:       c.Flag("nvml.library", "Path of libnvidia-ml.so.1 (default: the dynamic loader's search, then the usual driver directories).").String(),
		interval:      c.Flag("interval", "Sampling interval for --source nvml.").Default("100ms").Duration(),
		duration:      c.Flag("duration", "Stop after sampling this long (--source nvml; 0: until stopped).").Default("0").Duration(),
		record:        c.Flag("record", "Record what NVML returned into this capture file (--source nvml, or sim with one node).").String(),
		replay:        c.Flag("replay", "Capture file for --source replay.").String(),
		replayFast:    c.Flag("replay.fast", "Replay as fast as possible instead of at the recorded timing.").Bool(),
		summary:       c.Flag("summary", "Write a JSON summary of the run (per GPU and instance means) to this file at every flush.").String(),
		brokers:       c.Flag("kafka.brokers", "Kafka brokers (host:port,...); empty serves /metrics only.").String(),
		flushInterval: c.Flag("kafka.flush-interval", "How much sampled time goes into one SampleBatch per node.").Default("1s").Duration(),
		partitions:    c.Flag("kafka.partitions", "Partitions of the samples topic when it has to be created.").Default("4").Int(),
		spoolDir:      c.Flag("spool.dir", "Directory of the disk spool that keeps batches while Kafka is unreachable (empty: no spool; a failed write is dropped after its retries).").String(),
		spoolMax:      c.Flag("spool.max-bytes", "Size limit of the spool; when full the oldest batches are dropped and counted.").Default("1073741824").Int64(),
		web:           kingpinflag.AddFlags(c, ":9835"),
	}
}

// sourceRun is a chosen source with the loop settings it implies.
type sourceRun struct {
	src      exporter.Source
	start    time.Time
	end      time.Time
	interval time.Duration
	clock    exporter.Clock
	close    func() error
	describe []any
	poll     func(context.Context) // background work of the source (vGPU scheduler logs)
}

func (c *exporterCmd) run(ctx context.Context, logger *slog.Logger) error {
	reg := webserver.NewRegistry()
	nvmlMetrics := nvmlsource.NewMetrics(reg)
	run, err := c.openSource(nvmlMetrics, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := run.close(); err != nil {
			logger.Warn("closing the source", "err", err)
		}
	}()

	tp, stopTracing, err := tracerProvider(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()

	var ready atomic.Bool
	webCtx, stopWeb := context.WithCancel(ctx)
	defer stopWeb()
	webErr := webserver.Serve(webCtx, webserver.Options{Flags: c.web, Registry: reg, Ready: &ready, Logger: logger})

	sinks, pub, closeSinks, err := exporterSinksWith(ctx, reg, kafkaconn.ParseBrokers(*c.brokers), *c.partitions,
		spoolConfig{dir: *c.spoolDir, maxBytes: *c.spoolMax}, tp, logger)
	if err != nil {
		return err
	}
	defer closeSinks()
	if *c.summary != "" {
		sinks = append(sinks, summary.New(*c.summary))
	}
	bgCtx, stopBg := context.WithCancel(ctx)
	defer stopBg()
	senderDone := make(chan struct{})
	go func() { defer close(senderDone); pub.Run(bgCtx) }()
	if run.poll != nil {
		go run.poll(bgCtx)
	}
	ready.Store(true)
	loop := &exporter.Loop{
		Source: run.src, Clock: run.clock, Sinks: sinks, Start: run.start, End: run.end, Interval: run.interval,
		FlushEvery: *c.flushInterval, Logger: logger, Metrics: exporter.NewLoopMetrics(reg),
	}
	logger.Info("exporter sampling", append(run.describe, "interval", run.interval)...)
	return webserver.RunServing(webErr, func() error {
		n, err := loop.Run(ctx)
		logger.Info("exporter finished sampling", "samples", n)
		stopBg()
		<-senderDone
		// Deliver what is still spooled before exiting; what is left stays for the next start.
		drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := pub.Drain(drainCtx); derr != nil {
			logger.Warn("the spool was not drained", "err", derr)
		}
		return err
	})
}

func (c *exporterCmd) openSource(m *nvmlsource.Metrics, logger *slog.Logger) (*sourceRun, error) {
	switch *c.source {
	case "nvml":
		return c.openNVML(m, logger)
	case "sim":
		return c.openSim(m, logger)
	case "replay":
		if *c.replay == "" {
			return nil, usage.Errorf("--replay FILE is required with --source replay")
		}
		if *c.record != "" {
			return nil, usage.Errorf("--record: a replay cannot be recorded again")
		}
		p, err := replay.Load(*c.replay)
		if err != nil {
			return nil, usage.Wrap(err)
		}
		if err := p.Open(m, logger); err != nil {
			return nil, usage.Wrap(err)
		}
		var clock exporter.Clock = exporter.RealClock{Offset: time.Since(p.Start())}
		if *c.replayFast {
			clock = exporter.FastClock{}
		}
		return &sourceRun{src: p, start: p.Start(), end: p.End(), interval: p.Interval(), clock: clock, close: p.Close,
			describe: []any{"source", "replay", "capture", *c.replay, "node", p.Header.Node, "ticks", p.Ticks()}}, nil
	default:
		return nil, usage.Errorf("--source %q: expected nvml, sim or replay", *c.source)
	}
}

func (c *exporterCmd) openSim(m *nvmlsource.Metrics, logger *slog.Logger) (*sourceRun, error) {
	opts := sim.Options{Metrics: m, Logger: logger}
	closeRec := func() error { return nil }
	sc, err := loadScenario(*c.scenario)
	if err != nil {
		return nil, err
	}
	if *c.record != "" {
		node := *c.node
		if node == "" && len(sc.Nodes) == 1 {
			node = sc.Nodes[0].Name
		}
		rec, err := newRecorder(*c.record, node, sc.Interval, "sim", time.Duration(0))
		if err != nil {
			return nil, err
		}
		opts.Recorder, closeRec = rec, rec.Close
	}
	src, err := sim.NewWithOptions(sc, *c.node, opts)
	if err != nil {
		_ = closeRec()
		return nil, usage.Wrap(err)
	}
	var clock exporter.Clock = exporter.RealClock{Offset: time.Since(sc.Start)}
	if *c.fast {
		clock = exporter.FastClock{}
	}
	return &sourceRun{src: src, start: sc.Start, end: sc.End(), interval: sc.Interval, clock: clock, close: closeRec,
		describe: []any{"source", "sim", "scenario", sc.Name, "nodes", src.Nodes(), "instances", src.Instances(), "fast", *c.fast}}, nil
}

func (c *exporterCmd) openNVML(m *nvmlsource.Metrics, logger *slog.Logger) (*sourceRun, error) {
	if *c.interval <= 0 {
		return nil, usage.Errorf("--interval %s: expected > 0", *c.interval)
	}
	lib := nvmlsource.Library(*c.library)
	cfg := nvmlsource.Config{Node: *c.nodeName, IDs: nvmlsource.UUIDs, Metrics: m, Logger: logger, Rediscover: 10 * time.Second}
	closeRec := func() error { return nil }
	if *c.record != "" {
		rec, err := newRecorder(*c.record, *c.nodeName, *c.interval, "nvml", cfg.Rediscover)
		if err != nil {
			return nil, err
		}
		lib, cfg.BeforeRead, closeRec = rec.Library(lib), rec.BeginTick, rec.Close
	}
	// Ticks on the interval grid; the source is opened one interval before the first, which
	// is its first window (GPM needs a sample before it).
	start := time.Now().Truncate(*c.interval).Add(2 * *c.interval)
	src, err := nvmlsource.Open(lib, cfg, start.Add(-*c.interval))
	if err != nil {
		_ = closeRec()
		return nil, fmt.Errorf("--source nvml: %w", err)
	}
	var end time.Time
	if *c.duration > 0 {
		end = start.Add(*c.duration)
	}
	run := &sourceRun{src: src, start: start, end: end, interval: *c.interval, clock: exporter.RealClock{},
		close:    func() error { return errors.Join(src.Close(), closeRec()) },
		describe: []any{"source", "nvml", "node", *c.nodeName, "record", *c.record}}
	if *c.interval > 200*time.Millisecond {
		// The driver's vGPU scheduler log holds 200 entries: read it at least 5×/s.
		run.poll = func(ctx context.Context) { src.PollSchedulerLogs(ctx, *c.interval) }
	}
	return run, nil
}

func newRecorder(path, node string, interval time.Duration, source string, rediscover time.Duration) (*capture.Recorder, error) {
	if rediscover == 0 {
		rediscover = time.Duration(1<<63 - 1) // the simulator never rediscovers
	}
	w, err := capture.Create(path, capture.Header{Node: node, IntervalNs: int64(interval), Source: source, RediscoverNs: int64(rediscover)})
	if err != nil {
		return nil, usage.Errorf("--record %s: %v", path, err)
	}
	return capture.NewRecorder(w, interval), nil
}

func loadScenario(path string) (*scenario.Scenario, error) {
	if path == "" {
		return nil, usage.Errorf("--scenario is required with --source sim")
	}
	sc, err := scenario.Load(path)
	if err != nil {
		return nil, usage.Wrap(err)
	}
	return sc, nil
}

// loadSim loads a scenario for the sim source; every problem with it is a usage error.
func loadSim(path, node string) (*scenario.Scenario, *sim.Source, error) {
	sc, err := loadScenario(path)
	if err != nil {
		return nil, nil, err
	}
	src, err := sim.New(sc, node)
	if err != nil {
		return nil, nil, usage.Wrap(err)
	}
	return sc, src, nil
}

// tracerProvider returns an OpenTelemetry tracer provider exporting over OTLP/HTTP when the
// standard OTEL_EXPORTER_OTLP_* variables name an endpoint; otherwise nil (no tracing).
func tracerProvider(ctx context.Context) (trace.TracerProvider, func(), error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, func() {}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, usage.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %v", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("slicemeter-exporter"))))
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}, nil
}

type spoolConfig struct {
	dir      string
	maxBytes int64
}

// exporterSinks returns the Prometheus snapshot and, with brokers, the Kafka publisher.
func exporterSinks(ctx context.Context, reg *prometheus.Registry, brokers []string, partitions int, logger *slog.Logger) ([]exporter.Sink, func(), error) {
	sinks, _, closeFn, err := exporterSinksWith(ctx, reg, brokers, partitions, spoolConfig{}, nil, logger)
	return sinks, closeFn, err
}

// exporterSinksWith is exporterSinks with a spool and tracing. The publisher is nil-safe to
// Run and Drain: without brokers it is a publisher with nothing to send.
func exporterSinksWith(ctx context.Context, reg *prometheus.Registry, brokers []string, partitions int, sc spoolConfig,
	tp trace.TracerProvider, logger *slog.Logger) ([]exporter.Sink, *publish.Publisher, func(), error) {
	snap := promcollector.New()
	reg.MustRegister(snap)
	sinks := []exporter.Sink{snap}
	idle := publish.New(nil, pb.TopicSamples, nil, logger) // Run and Drain return at once
	if len(brokers) == 0 {
		return sinks, idle, func() {}, nil
	}
	w := kafkaconn.NewWriter(brokers, "", logger)
	// A flush is one message per node, already a batch: send it at once rather than waiting
	// BatchTimeout for more messages that will not come.
	w.BatchSize = 1
	// The spool first: a bad spool setting is the user's to fix, whatever Kafka's state.
	pub, err := publish.Open(w, pb.TopicSamples, reg, logger, publish.Options{SpoolDir: sc.dir, SpoolMaxBytes: sc.maxBytes, Tracer: tp})
	if err != nil {
		return nil, nil, nil, usage.Errorf("--spool.dir: %v", err)
	}
	if err := kafkaconn.EnsureTopics(ctx, brokers, partitions, pb.TopicSamples); err != nil {
		_ = pub.Close()
		return nil, nil, nil, err
	}
	sinks = append(sinks, pub)
	return sinks, pub, func() {
		if err := w.Close(); err != nil && !errors.Is(err, context.Canceled) {
			logger.Warn("closing the Kafka writer", "err", err)
		}
		if err := pub.Close(); err != nil {
			logger.Warn("closing the spool", "err", err)
		}
	}, nil
}

// simLoop samples the scenario's window, in real time (from now on) or as fast as possible.
func simLoop(sc *scenario.Scenario, src exporter.Source, fast bool, flush time.Duration, sinks []exporter.Sink, reg prometheus.Registerer, logger *slog.Logger) *exporter.Loop {
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
