package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slicemeter/slicemeter/collector"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

type collectorCmd struct {
	brokers       *string
	group         *string
	partitions    *int
	dsn           *string
	cluster       *string
	flushRows     *int
	flushInterval *time.Duration
	retention     collector.Retention
	web           *web.FlagConfig
}

func newCollectorCmd(app *kingpin.Application) *collectorCmd {
	c := app.Command("collector", "Consume samples and allocations from Kafka and store them in ClickHouse.")
	cmd := &collectorCmd{
		brokers:       c.Flag("kafka.brokers", "Kafka brokers (host:port,...).").Required().String(),
		group:         c.Flag("kafka.group", "Consumer group; collectors in one group split the partitions.").Default("slicemeter-collector").String(),
		partitions:    c.Flag("kafka.partitions", "Partitions of the topics when they have to be created.").Default("4").Int(),
		dsn:           dsnFlag(c),
		cluster:       clusterFlag(c),
		flushRows:     c.Flag("collector.flush-rows", "Insert when this many rows are buffered.").Default("100000").Int(),
		flushInterval: c.Flag("collector.flush-interval", "Insert at least this often.").Default("1s").Duration(),
		web:           kingpinflag.AddFlags(c, ":9836"),
	}
	// Whole days are what expires (day partitions); 0 keeps everything.
	c.Flag("retention.raw", "Keep raw samples this long (e.g. 168h; 0: forever).").Default("0").DurationVar(&cmd.retention.Raw)
	c.Flag("retention.rollup-1s", "Keep the per-second rollup this long (0: forever).").Default("0").DurationVar(&cmd.retention.Rollup1s)
	c.Flag("retention.rollup-1m", "Keep the per-minute rollup this long (0: forever).").Default("0").DurationVar(&cmd.retention.Rollup1m)
	return cmd
}

func (c *collectorCmd) run(ctx context.Context, logger *slog.Logger) error {
	brokers := kafkaconn.ParseBrokers(*c.brokers)
	if len(brokers) == 0 {
		return usage.Errorf("--kafka.brokers: %q names no broker; expected host:port[,host:port...]", *c.brokers)
	}
	for flag, d := range map[string]time.Duration{"--retention.raw": c.retention.Raw,
		"--retention.rollup-1s": c.retention.Rollup1s, "--retention.rollup-1m": c.retention.Rollup1m} {
		if d < 0 {
			return usage.Errorf("%s: %s is negative; expected a duration such as 168h, or 0 to keep everything", flag, d)
		}
	}
	if *c.cluster != "" {
		if err := migrations.ValidClusterName(*c.cluster); err != nil {
			return usage.Errorf("--clickhouse.cluster: %w", err)
		}
	}
	reg := webserver.NewRegistry()
	var ready atomic.Bool
	webErr := webserver.Serve(ctx, webserver.Options{Flags: c.web, Registry: reg, Ready: &ready, Logger: logger})
	if err := kafkaconn.EnsureTopics(ctx, brokers, *c.partitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		return err
	}
	c.retention.Cluster = *c.cluster
	conn, err := openMigratedCluster(ctx, *c.dsn, *c.cluster, logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := requireClusterSettings(ctx, conn, *c.cluster); err != nil {
		return err
	}
	col, err := collector.New(collector.Config{
		Brokers: brokers, GroupID: *c.group, FlushRows: *c.flushRows, FlushInterval: *c.flushInterval,
		Retention: c.retention,
	}, conn, reg, logger)
	if err != nil {
		return err
	}
	ready.Store(true)
	return webserver.RunServing(webErr, func() error { return col.Run(ctx) })
}
