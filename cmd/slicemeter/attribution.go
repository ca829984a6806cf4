//go:build !exporter_only

package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/attribution/api/auth"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/shard"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/internal/memlimit"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"
)

type attributionCmd struct {
	cfg     service.Config
	dsn     *string
	cluster *string
	book    *pricebookFlags
	samples *string
	shards  *shard.Options
	memory  *string
}

func newAttributionCmd(app *kingpin.Application) *attributionCmd {
	c := app.Command("attribution", "Attribute every closed minute continuously into ClickHouse, serve the SLA metrics on /metrics and the API on /api/v1.")
	cmd := &attributionCmd{
		dsn:     dsnFlag(c),
		cluster: clusterFlag(c),
		book:    addPricebookFlags(c),
	}
	c.Flag("attribution.interval", "How often closed minutes are attributed (and the trailing window's gauges refreshed).").Default("1m").DurationVar(&cmd.cfg.Interval)
	c.Flag("attribution.window", "Length of the trailing window that the slicemeter_tenant_* gauges describe (jitter p99 slides with it).").Default("1h").DurationVar(&cmd.cfg.Window)
	// The per-second rollup: a minute of 1000 instances in about 1 s where raw 10 Hz samples
	// take 2.5 s (BenchmarkMinute), exact for allocations on whole seconds.
	cmd.samples = samplesFlag(c, "rollup-1s")
	cmd.cfg.Web = webFlags(c, ":9837")
	cmd.cfg.Reports = reportLimitFlags(c)
	c.Flag("api.auth-file", "Who may use /api/v1: bearer token hashes and JWT settings (YAML; docs/api.md, \"API authentication\").").PlaceHolder("FILE").StringVar(&cmd.cfg.AuthFile)
	c.Flag("api.insecure-no-auth", "Serve /api/v1 without authentication: every caller is an operator (a warning is logged).").BoolVar(&cmd.cfg.InsecureNoAuth)
	c.Flag("attribution.delay", "A minute is attributed this long after it ends (samples arrive late through Kafka).").Default("30s").DurationVar(&cmd.cfg.Delay)
	c.Flag("attribution.lookback", "Every pass attributes again the closed minutes this far back, so late samples count.").Default("10m").DurationVar(&cmd.cfg.Lookback)
	c.Flag("attribution.backfill", "With no minute stored yet, start this far back.").Default("1h").DurationVar(&cmd.cfg.Backfill)
	c.Flag("attribution.max-recompute", "How far back an allocation that arrives late makes the service recompute.").Default("744h").DurationVar(&cmd.cfg.MaxRecompute)
	presenceFlag(c, &cmd.cfg.Presence)
	tenantLimitFlag(c, &cmd.cfg.FleetTenantLimit)
	c.Flag("billing.close-after", "Close each billing period (a calendar month in the price book's timezone) this long after its end; 0: never.").
		Default("72h").DurationVar(&cmd.cfg.CloseAfter)
	cmd.cfg.Export = addExportFlags(c)
	cmd.shards = shardFlags(c)
	cmd.memory = memoryLimitFlag(c)
	c.Flag("attribution.max-minutes", "At most this many minutes per pass (the rest follow in the next passes).").Default("120").IntVar(&cmd.cfg.MaxMinutes)
	return cmd
}

func (c *attributionCmd) run(ctx context.Context, logger *slog.Logger) error {
	cfg := c.cfg
	// Flags first: a bad flag is reported before a missing price book. The flag has no "0: the
	// default" as the config has.
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := store.CheckPresence(cfg.Presence); err != nil {
		return usage.Errorf("--attribution.presence: %w", err)
	}
	if err := memlimit.Set(*c.memory, logger); err != nil {
		return err
	}
	var err error
	if cfg.Book, err = c.book.load(); err != nil {
		return err
	}
	cfg.DSN, cfg.Cluster = *c.dsn, *c.cluster
	cfg.Samples = sampleSource(*c.samples)
	reg := webserver.NewRegistry()
	group, err := c.shards.Open(ctx, logger, reg)
	if err != nil {
		return err
	}
	defer group.Close()
	if group != nil {
		cfg.Shards = group
	}
	return service.Run(ctx, cfg, reg, logger)
}

// reportLimitFlags adds the --api.max-report-* flags to c.
func reportLimitFlags(c *kingpin.CmdClause) *api.ReportLimits {
	l, d := &api.ReportLimits{}, api.DefaultReportLimits()
	c.Flag("api.max-report-windows", "Most windows of one report request (its step over from..to; for format=focus and the fleet report, its hours); more: 400, before anything is read. 0: no limit.").Default(strconv.Itoa(d.MaxWindows)).IntVar(&l.MaxWindows)
	c.Flag("api.max-report-cost", "Most windows × tenants of one report request; more: 400. 0: no limit.").Default(strconv.Itoa(d.MaxCost)).IntVar(&l.MaxCost)
	c.Flag("api.max-report-rows", "Most rows of one report response; more: 400. 0: no limit.").Default(strconv.Itoa(d.MaxRows)).IntVar(&l.MaxRows)
	c.Flag("api.max-concurrent-reports", "Most reports computed at once; more: 429 with Retry-After. 0: no limit.").Default(strconv.Itoa(d.MaxConcurrent)).IntVar(&l.MaxConcurrent)
	c.Flag("api.max-concurrent-reports-per-client", "Most reports of one client (its token or JWT subject; with --api.insecure-no-auth its IP) computed at once; more: 429 with Retry-After. 0: no limit.").Default(strconv.Itoa(d.MaxConcurrentPerClient)).IntVar(&l.MaxConcurrentPerClient)
	c.Flag("api.report-retry-after", "The Retry-After of a 429.").Default(d.RetryAfter.String()).DurationVar(&l.RetryAfter)
	c.Flag("api.max-audit-rows", "Most entries of one /api/v1/audit response; more: 400. 0: no limit.").Default(strconv.Itoa(d.MaxAuditRows)).IntVar(&l.MaxAuditRows)
	c.Flag("api.max-allocation-rows", "Most allocations of one GET /api/v1/allocations response; more: 400. 0: no limit.").Default(strconv.Itoa(d.MaxAllocationRows)).IntVar(&l.MaxAllocationRows)
	c.Flag("api.max-concurrent-writes", "Most POST /api/v1/allocations handled at once (each may hold a body of up to 64 MiB and the allocations decoded from it); more: 429 with Retry-After. 0: no limit.").Default(strconv.Itoa(d.MaxConcurrentWrites)).IntVar(&l.MaxConcurrentWrites)
	return l
}

// memoryLimitFlag adds --memory.limit: the soft limit of the Go heap (memlimit.Set).
func memoryLimitFlag(c *kingpin.CmdClause) *string {
	return c.Flag("memory.limit", "The service's memory budget: the Go runtime's soft memory limit (GOMEMLIMIT), e.g. 2GiB or 512MiB; "+
		"0: none. Unset: GOMEMLIMIT if the environment sets it, else "+memlimit.Default+".").PlaceHolder("BYTES").String()
}

// newAPICmd is `slicemeter api token hash`: a token on stdin, its --api.auth-file entry on stdout.
func newAPICmd(app *kingpin.Application, stdout io.Writer) command {
	c := app.Command("api", "The attribution API's access.").Command("token", "Bearer tokens.").Command("hash", "Read a token on stdin; print its --api.auth-file entry (bcrypt hash and lookup key), ready to use with --role (and --tenant), else with placeholders to edit.")
	name := c.Flag("name", "The entry's name (for logs).").Default("TOKEN-NAME").String()
	role := c.Flag("role", "The token's role: operator, finance, scheduler or tenant.").PlaceHolder("ROLE").String()
	tenants := c.Flag("tenant", "A tenant the token reads (role tenant: at least one) or writes allocations for (role scheduler: none means every tenant); repeatable.").PlaceHolder("NAME").Strings()
	return runFunc(func(context.Context, *slog.Logger) error {
		return auth.HashEntryFor(os.Stdin, stdout, *name, api.Role(*role), *tenants)
	})
}

// shardFlags adds the --attribution.shard.* flags to the attribution command.
func shardFlags(cmd *kingpin.CmdClause) *shard.Options {
	f := &shard.Options{}
	cmd.Flag("attribution.shard.brokers", "Kafka brokers (host:port,...) of the consumer group that shares the nodes between attribution replicas; empty: no sharding, this replica attributes every node.").
		PlaceHolder("BROKERS").StringVar(&f.Brokers)
	cmd.Flag("attribution.shard.group", "Consumer group the attribution replicas of this deployment share.").Default(shard.DefaultGroup).StringVar(&f.Group)
	cmd.Flag("attribution.shard.topic", "Topic of the group (no message is written to it): a node belongs to partition FNV-1a(node) mod its partition count.").
		Default(shard.DefaultTopic).StringVar(&f.Topic)
	cmd.Flag("attribution.shard.partitions", "Partitions of the topic when it has to be created (an existing topic keeps its count; do not change it while replicas run).").
		Default(strconv.Itoa(shard.DefaultPartitions)).IntVar(&f.Partitions)
	cmd.Flag("attribution.shard.session-timeout", "How long Kafka waits for a replica that stopped before it gives its nodes to the others (the brokers accept 6s to 30m by default).").
		Default(shard.DefaultSessionTimeout.String()).DurationVar(&f.SessionTimeout)
	kafkaSecurityFlags(cmd, &f.Security)
	return f
}
