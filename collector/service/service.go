// Package service is the collector as a process: it checks its configuration, makes sure the
// topics exist, opens and migrates ClickHouse, serves /metrics, /healthz and /readyz, and runs
// the collector until its context ends. `slicemeter collector` is its flags and this.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/collector"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/lograte"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Config is what the service runs with. Its errors name the command's flags.
type Config struct {
	Brokers    string // --kafka.brokers: host:port[,host:port...]
	Partitions int    // --kafka.partitions: of the topics when they have to be created
	// Kafka is the --kafka.tls.* and --kafka.sasl.* flags: how every connection is secured.
	Kafka   kafkaconn.SecurityConfig
	DSN     string // --clickhouse.dsn
	Cluster string // --clickhouse.cluster; "" for a single server
	// Collector is the collector's batching and retention; Run fills in Brokers and
	// Retention.Cluster from the fields above.
	Collector collector.Config
	Web       *webserver.Flags // listen addresses and web config; nil serves nothing
}

// check refuses a configuration the flags should not have allowed (usage errors, exit 2).
func (c Config) check() (kafkaconn.Cluster, error) {
	brokers := kafkaconn.ParseBrokers(c.Brokers)
	if len(brokers) == 0 {
		return kafkaconn.Cluster{}, usage.Errorf("--kafka.brokers: %q names no broker; expected host:port[,host:port...]", c.Brokers)
	}
	sec, err := c.Kafka.Load()
	if err != nil {
		return kafkaconn.Cluster{}, err
	}
	r := c.Collector.Retention
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{{"--retention.raw", r.Raw}, {"--retention.rollup-1s", r.Rollup1s}, {"--retention.rollup-1m", r.Rollup1m}} {
		if d.d < 0 {
			return kafkaconn.Cluster{}, usage.Errorf("%s: %s is negative; expected a duration such as 168h, or 0 to keep everything", d.flag, d.d)
		}
	}
	if c.Cluster != "" {
		if err := migrations.ValidClusterName(c.Cluster); err != nil {
			return kafkaconn.Cluster{}, usage.Errorf("--clickhouse.cluster: %w", err)
		}
	}
	return kafkaconn.Cluster{Brokers: brokers, Security: sec}, nil
}

// Service is a collector ready to consume: its topics exist and its ClickHouse schema is in
// place.
type Service struct {
	cfg    Config
	reg    *prometheus.Registry
	logger *slog.Logger
	conn   driver.Conn
	col    *collector.Collector
	ready  atomic.Bool
	webErr <-chan error
	stop   context.CancelFunc

	// kafkaWaits counts the attempts to reach Kafka at start that failed; missing is what
	// /readyz says is lacking meanwhile.
	kafkaWaits prometheus.Counter
	mu         sync.Mutex
	missing    string
}

// Waiting for Kafka at start: the first retry after KafkaRetryMin, doubling up to
// KafkaRetryMax; one log line per KafkaLogEvery says how many attempts failed since the last.
const (
	KafkaRetryMin = 500 * time.Millisecond
	KafkaRetryMax = 15 * time.Second
	KafkaLogEvery = time.Minute
)

// New checks cfg, starts serving reg (so /healthz answers while ClickHouse or Kafka are still
// awaited; /readyz answers ready once Run consumes), makes sure the topics exist, opens and
// migrates ClickHouse and sets up the collector. Close releases what it opened.
func New(ctx context.Context, cfg Config, reg *prometheus.Registry, logger *slog.Logger) (*Service, error) {
	kc, err := cfg.check()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, reg: reg, logger: logger}
	s.kafkaWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "slicemeter_collector_kafka_unreachable_total",
		Help: "Attempts to reach Kafka at start that failed; the collector waits and retries with back-off, not ready meanwhile.",
	})
	if reg != nil {
		if err := reg.Register(s.kafkaWaits); err != nil {
			return nil, fmt.Errorf("collector: register metrics: %w", err)
		}
	}
	webCtx, stop := context.WithCancel(ctx)
	s.stop = stop
	s.webErr = webserver.Serve(webCtx, webserver.Options{Flags: cfg.Web, Registry: reg, Ready: &s.ready, Missing: s.lacking, Logger: logger})
	if err := s.open(ctx, kc); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// lacking is what /readyz names while the service waits (one line, or none).
func (s *Service) lacking() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.missing == "" {
		return nil
	}
	return []string{s.missing}
}

func (s *Service) setMissing(what string) {
	s.mu.Lock()
	s.missing = what
	s.mu.Unlock()
}

// errStopped: the service was stopped before it could start; not a failure.
var errStopped = errors.New("collector: stopped before it started")

// ensureTopics makes sure the topics exist, waiting for Kafka as long as it cannot be reached:
// a collector started before its brokers (a node reboot, a Deployment applied before Kafka's
// StatefulSet) waits for them, as the exporter does, instead of exiting. Brokers that answer
// and refuse this client (credentials, certificate) stop it at once: retrying cannot help.
func (s *Service) ensureTopics(ctx context.Context, kc kafkaconn.Cluster) error {
	limit := lograte.New(s.logger, KafkaLogEvery)
	retry := KafkaRetryMin
	for attempt := 1; ; attempt++ {
		err := kc.EnsureTopics(ctx, s.cfg.Partitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter)
		if err == nil {
			if attempt > 1 {
				s.logger.Info("Kafka reached; starting", "brokers", kc.Brokers, "attempts", attempt)
			}
			s.setMissing("")
			return nil
		}
		if kafkaconn.Refused(err) {
			return err
		}
		if ctx.Err() != nil {
			return errStopped
		}
		s.kafkaWaits.Inc()
		s.setMissing("kafka: " + err.Error())
		limit.Log(ctx, time.Now(), slog.LevelWarn, "kafka_unreachable", "Kafka cannot be reached; waiting for it (not ready meanwhile)",
			"brokers", kc.Brokers, "attempt", attempt, "retry_in", retry, "err", err)
		select {
		case <-ctx.Done():
			s.logger.Info("stopped while waiting for Kafka", "brokers", kc.Brokers, "attempts", attempt)
			return errStopped
		case <-time.After(retry):
		}
		retry = min(2*retry, KafkaRetryMax)
	}
}

func (s *Service) open(ctx context.Context, kc kafkaconn.Cluster) error {
	if err := s.ensureTopics(ctx, kc); err != nil {
		return err
	}
	conn, err := migrations.OpenMigrated(ctx, s.cfg.DSN, s.cfg.Cluster, s.logger)
	if err != nil {
		return err
	}
	s.conn = conn
	if err := migrations.RequireClusterSettings(ctx, conn, s.cfg.Cluster); err != nil {
		return err
	}
	colCfg := s.cfg.Collector
	colCfg.Brokers, colCfg.KafkaSecurity = kc.Brokers, kc.Security
	colCfg.Retention.Cluster = s.cfg.Cluster
	s.col, err = collector.New(colCfg, conn, s.reg, s.logger)
	return err
}

// Run consumes until ctx ends or serving fails.
func (s *Service) Run(ctx context.Context) error {
	s.ready.Store(true)
	return webserver.RunServing(s.webErr, func() error { return s.col.Run(ctx) })
}

// Stored is how many samples and allocation events the collector has stored so far.
func (s *Service) Stored() (samples, allocations uint64) { return s.col.Stored() }

// Conn is the migrated ClickHouse connection the collector writes through.
func (s *Service) Conn() driver.Conn { return s.conn }

// Close stops serving and closes the ClickHouse connection.
func (s *Service) Close() {
	s.stop()
	if s.conn != nil {
		s.conn.Close()
	}
}

// Run runs the collector service until ctx ends: New, then Service.Run.
func Run(ctx context.Context, cfg Config, reg *prometheus.Registry, logger *slog.Logger) error {
	s, err := New(ctx, cfg, reg, logger)
	if errors.Is(err, errStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Run(ctx)
}
