//go:build !exporter_only

package main

import (
	"context"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/collector/service"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// defaultRawRetention is how long the collector keeps raw samples unless told: 14 days, what the
// chart sets, so that a collector run by hand does not fill its disk.
const defaultRawRetention = "336h"

// collectorCmd is `slicemeter collector`: its flags fill a service.Config.
type collectorCmd struct {
	cfg          service.Config
	dsn, cluster *string // the flags every ClickHouse client shares
	book         *string
}

func newCollectorCmd(app *kingpin.Application) *collectorCmd {
	c := app.Command("collector", "Consume samples and allocations from Kafka and store them in ClickHouse.")
	cmd := &collectorCmd{}
	cfg := &cmd.cfg
	c.Flag("kafka.brokers", "Kafka brokers (host:port,...).").Required().StringVar(&cfg.Brokers)
	kafkaSecurityFlags(c, &cfg.Kafka)
	c.Flag("kafka.group", "Consumer group; collectors in one group split the partitions.").Default("slicemeter-collector").StringVar(&cfg.Collector.GroupID)
	c.Flag("kafka.partitions", "Partitions of the topics when they have to be created.").Default("4").IntVar(&cfg.Partitions)
	cmd.dsn, cmd.cluster = dsnFlag(c), clusterFlag(c)
	cmd.book = c.Flag("pricebook", "Price book file: dead-letter allocation events at a tier it lacks (reason invalid, field tier) instead of storing them. Read at start: restart the collector after adding a tier.").String()
	c.Flag("collector.flush-rows", "Insert when this many rows are buffered.").Default("100000").IntVar(&cfg.Collector.FlushRows)
	c.Flag("collector.flush-interval", "Insert at least this often.").Default("1s").DurationVar(&cfg.Collector.FlushInterval)
	c.Flag("collector.allow-tenant-moves", "Store allocation events that move a live allocation to another tenant (without: dead-lettered, reason tenant_move).").BoolVar(&cfg.Collector.AllowTenantMoves)
	cfg.Web = webFlags(c, ":9836")
	// Whole days are what expires (day partitions); 0 keeps everything.
	r := &cfg.Collector.Retention
	// Raw samples are the largest table by far: 14 days by default, as in the Helm chart
	// (TestCollectorRetentionDefaultsAreTheChart); the rollups reports read stay.
	c.Flag("retention.raw", "Keep raw samples this long (0: forever).").Default(defaultRawRetention).DurationVar(&r.Raw)
	c.Flag("retention.rollup-1s", "Keep the per-second rollup this long (0: forever).").Default("0").DurationVar(&r.Rollup1s)
	c.Flag("retention.rollup-1m", "Keep the per-minute rollup this long (0: forever).").Default("0").DurationVar(&r.Rollup1m)
	return cmd
}

func (c *collectorCmd) run(ctx context.Context, logger *slog.Logger) error {
	cfg := c.cfg
	cfg.DSN, cfg.Cluster = *c.dsn, *c.cluster
	if *c.book != "" {
		book, err := pricebook.Load(*c.book)
		if err != nil {
			return usage.Wrap(err)
		}
		cfg.Collector.Book = book
	}
	return service.Run(ctx, cfg, webserver.NewRegistry(), logger)
}
