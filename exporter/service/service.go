package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/kubernetes"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/exporter/promcollector"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/webserver"
)

// Service is one exporter run: New opens the source, Run samples it, Close releases it.
type Service struct {
	cfg    Config
	reg    *prometheus.Registry
	logger *slog.Logger
	src    *source
	kafka  kafkaconn.Cluster // Config.Brokers with the loaded Config.Kafka
	// kube is the --kubernetes discovery (nil without); closeKube releases its connections.
	kube      *kubernetes.Discovery
	closeKube func()
	// simAllocMetrics counts the simulated scheduler's publishing (--sim.allocations).
	simAllocMetrics *simAllocationMetrics
	// snap is the latest samples served on /metrics: beside reg rather than registered in it
	// (webserver.TextCollector: written straight as text) where the exporter serves /metrics
	// itself; registered in reg where the process serves reg (the demo).
	snap *promcollector.Collector
}

// New opens the source cfg names, registering its metrics in reg. A bad Config is a usage error.
func New(cfg Config, reg *prometheus.Registry, logger *slog.Logger) (*Service, error) {
	sec, err := cfg.Kafka.Load()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, reg: reg, logger: logger, kafka: kafkaconn.Cluster{Brokers: cfg.Brokers, Security: sec},
		snap: promcollector.New(promcollector.Options{})}
	if !cfg.Web.Serves() {
		reg.MustRegister(s.snap)
	}
	// The source as SourceOf implies it, not as the flag gives it: --scenario without --source
	// is sim too, and its scheduler publishes (startSimScheduler reads the source openSource set).
	source, err := SourceOf(cfg)
	if err != nil {
		return nil, err
	}
	if source == "sim" && cfg.SimAllocations {
		s.simAllocMetrics = newSimAllocationMetrics(reg)
	}
	// The discovery comes first: its Shares is what the nvml source samples share instances by.
	if s.kube, s.closeKube, err = s.openKubernetes(); err != nil {
		return nil, err
	}
	var shares exporter.Shares
	if s.kube != nil {
		shares = s.kube.Shares()
	}
	if s.src, err = openSource(&s.cfg, shares, nvmlsource.NewMetrics(reg), logger); err != nil {
		s.closeKube()
		return nil, err
	}
	return s, nil
}

// direct is the snapshot where the exporter serves it beside its registry, else nil.
func (s *Service) direct() webserver.TextCollector {
	if !s.cfg.Web.Serves() {
		return nil
	}
	return s.snap
}

// Instances is the number of instances a tick samples, where the source knows it before
// sampling (a simulated fleet without outages); 0 otherwise.
func (s *Service) Instances() int { return s.src.instances }

// Close releases the source (NVML, the capture being recorded).
func (s *Service) Close() error {
	closeSrc := s.src.close
	s.src.close = noClose
	s.closeKube()
	s.closeKube = func() {}
	return closeSrc()
}

// Run samples the source until its end (a scenario's or a capture's window, Config.Duration)
// or until ctx ends, serving the registry meanwhile; then it delivers what is still spooled. It
// returns the samples taken.
func (s *Service) Run(ctx context.Context) (int64, error) {
	tp, stopTracing, err := tracerProvider(ctx, s.logger)
	if err != nil {
		return 0, err
	}
	defer stopTracing()

	ready := s.cfg.Ready
	if ready == nil {
		ready = new(atomic.Bool)
	}
	if err := s.checkKafka(ctx); err != nil {
		return 0, err
	}
	sinks, pub, closeSinks, err := s.openSinks(tp)
	if err != nil {
		return 0, err
	}
	webCtx, stopWeb := context.WithCancel(ctx)
	defer stopWeb()
	webErr := webserver.Serve(webCtx, webserver.Options{Flags: s.cfg.Web, Registry: s.reg, Direct: s.direct(), Ready: ready, Logger: s.logger,
		Missing: func() []string {
			var missing []string
			if m := pub.Missing(); m != "" {
				missing = append(missing, m)
			}
			if s.kube != nil {
				missing = append(missing, s.kube.Missing()...)
			}
			return missing
		}})

	defer closeSinks()
	bgCtx, stopBg := context.WithCancel(ctx)
	defer stopBg()
	senderDone := make(chan struct{})
	go func() { defer close(senderDone); pub.Run(bgCtx) }()
	if s.src.poll != nil {
		go s.src.poll(bgCtx)
	}
	kubeDone := make(chan struct{})
	if s.kube != nil {
		go func() { defer close(kubeDone); s.kube.Run(bgCtx) }()
	} else {
		close(kubeDone)
	}
	defer func() { stopBg(); <-kubeDone }()
	stopSimScheduler := s.startSimScheduler(bgCtx)
	defer stopSimScheduler()
	ready.Store(true)
	src := s.src
	loop := &exporter.Loop{
		Source: src.Source, Clock: src.clock, Sinks: sinks, Start: src.start, End: src.end, Interval: src.interval,
		FlushEvery: s.cfg.FlushInterval, Logger: s.logger, Metrics: exporter.NewLoopMetrics(s.reg),
	}
	s.logger.Info("exporter sampling", append(src.describe, "interval", src.interval)...)
	var taken atomic.Int64 // read here while a failure to serve may leave the loop running
	err = webserver.RunServing(webErr, func() error {
		n, err := loop.Run(ctx)
		taken.Store(n)
		s.logger.Info("exporter finished sampling", "samples", n)
		stopBg()
		<-senderDone
		// Deliver what is still queued before exiting; what is left stays in the spool for the
		// next start (or is lost with the memory queue), and the exit says so.
		drainFor := s.cfg.DrainTimeout
		if drainFor <= 0 {
			drainFor = 30 * time.Second
		}
		drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainFor)
		defer cancel()
		if derr := pub.Drain(drainCtx); derr != nil {
			s.logger.Error("stopping with samples not delivered to Kafka", "err", derr)
			if err == nil {
				err = fmt.Errorf("stopping with undelivered samples: %w", derr)
			}
		}
		return err
	})
	return taken.Load(), err
}

// checkKafka makes a secured connection to Kafka once before sampling, within
// kafkaconn.CheckTimeout, so that refused credentials or an untrusted certificate stop the
// exporter with an error naming the brokers and the mechanism instead of filling the spool.
// Brokers that cannot be reached are not fatal: the exporter spools until they can.
func (s *Service) checkKafka(ctx context.Context) error {
	if len(s.kafka.Brokers) == 0 || !s.kafka.Security.Enabled() {
		return nil
	}
	err := s.kafka.Check(ctx)
	if kafkaconn.Refused(err) {
		return err
	}
	if err != nil {
		s.logger.Warn("Kafka is not reachable yet; spooling until it is", "err", err)
	}
	return nil
}
