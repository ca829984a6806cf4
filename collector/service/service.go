// Package service is the collector as a process: it checks its configuration, makes sure the
// topics exist, opens and migrates ClickHouse, serves /metrics, /healthz and /readyz, and runs
// the collector until its context ends. `slicemeter collector` is its flags and this.
package service

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/collector"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
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
}

// New checks cfg, starts serving reg (so /healthz answers while ClickHouse or Kafka are still
// awaited; /readyz answers ready once Run consumes), makes sure the topics exist, opens and
// migrates ClickHouse and sets up the collector. Close releases what it opened.
func New(ctx context.Context, cfg Config, reg *prometheus.Registry, logger *slog.Logger) (*Service, error) {
	kc, err := cfg.check()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, reg: reg, logger: logger}
	webCtx, stop := context.WithCancel(ctx)
	s.stop = stop
	s.webErr = webserver.Serve(webCtx, webserver.Options{Flags: cfg.Web, Registry: reg, Ready: &s.ready, Logger: logger})
	if err := s.open(ctx, kc); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Service) open(ctx context.Context, kc kafkaconn.Cluster) error {
	if err := kc.EnsureTopics(ctx, s.cfg.Partitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
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
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Run(ctx)
}
