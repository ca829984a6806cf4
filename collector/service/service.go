// Package service is the collector as a process: it checks its configuration, makes sure the
// topics exist, opens and migrates ClickHouse, serves /metrics, /healthz and /readyz, and runs
// the collector until its context ends. `slicemeter collector` is its flags and this.
package service

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"

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
	DSN        string // --clickhouse.dsn
	Cluster    string // --clickhouse.cluster; "" for a single server
	// Collector is the collector's batching and retention; Run fills in Brokers and
	// Retention.Cluster from the fields above.
	Collector collector.Config
	Web       *web.FlagConfig // listen addresses and web config; nil serves nothing
}

// check refuses a configuration the flags should not have allowed (usage errors, exit 2).
func (c Config) check() ([]string, error) {
	brokers := kafkaconn.ParseBrokers(c.Brokers)
	if len(brokers) == 0 {
		return nil, usage.Errorf("--kafka.brokers: %q names no broker; expected host:port[,host:port...]", c.Brokers)
	}
	r := c.Collector.Retention
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{{"--retention.raw", r.Raw}, {"--retention.rollup-1s", r.Rollup1s}, {"--retention.rollup-1m", r.Rollup1m}} {
		if d.d < 0 {
			return nil, usage.Errorf("%s: %s is negative; expected a duration such as 168h, or 0 to keep everything", d.flag, d.d)
		}
	}
	if c.Cluster != "" {
		if err := migrations.ValidClusterName(c.Cluster); err != nil {
			return nil, usage.Errorf("--clickhouse.cluster: %w", err)
		}
	}
	return brokers, nil
}

// Run runs the collector service until ctx ends; reg is served on /metrics and holds the
// collector's metrics. /readyz answers ready once the schema is in place and the collector
// consumes.
func Run(ctx context.Context, cfg Config, reg *prometheus.Registry, logger *slog.Logger) error {
	brokers, err := cfg.check()
	if err != nil {
		return err
	}
	var ready atomic.Bool
	webErr := webserver.Serve(ctx, webserver.Options{Flags: cfg.Web, Registry: reg, Ready: &ready, Logger: logger})
	if err := kafkaconn.EnsureTopics(ctx, brokers, cfg.Partitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		return err
	}
	conn, err := migrations.OpenMigrated(ctx, cfg.DSN, cfg.Cluster, logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := migrations.RequireClusterSettings(ctx, conn, cfg.Cluster); err != nil {
		return err
	}
	colCfg := cfg.Collector
	colCfg.Brokers = brokers
	colCfg.Retention.Cluster = cfg.Cluster
	col, err := collector.New(colCfg, conn, reg, logger)
	if err != nil {
		return err
	}
	ready.Store(true)
	return webserver.RunServing(webErr, func() error { return col.Run(ctx) })
}
