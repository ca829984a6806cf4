package main

import (
	"context"
	"log/slog"

	"github.com/slicemeter/slicemeter/internal/usage"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

type migrateCmd struct {
	dsn     *string
	cluster *string
}

func newMigrateCmd(app *kingpin.Application) *migrateCmd {
	c := app.Command("migrate", "Create or upgrade slicemeter's ClickHouse tables (idempotent, recorded in schema_migrations).")
	return &migrateCmd{
		dsn: dsnFlag(c),
		cluster: c.Flag("cluster", "Create the tables ON CLUSTER this cluster (a <remote_servers> entry; needs ZooKeeper and "+
			"the macros {shard} and {replica}): Replicated<name>_local tables on every node behind Distributed tables under "+
			"the usual names. Empty: a single server.").Default("").String(),
	}
}

func dsnFlag(c *kingpin.CmdClause) *string {
	return c.Flag("clickhouse.dsn", "ClickHouse native-protocol DSN: clickhouse://host:9000/database.").Default("clickhouse://127.0.0.1:9000/slicemeter").String()
}

func (c *migrateCmd) run(ctx context.Context, logger *slog.Logger) error {
	if *c.cluster != "" {
		if err := migrations.ValidClusterName(*c.cluster); err != nil {
			return usage.Errorf("--cluster: %w", err)
		}
	}
	conn, err := openMigratedCluster(ctx, *c.dsn, *c.cluster, logger)
	if err != nil {
		return err
	}
	return conn.Close()
}

// clusterFlag is the ClickHouse cluster a collector or attribution service writes and reads
// through (tables created by migrate --cluster).
func clusterFlag(c *kingpin.CmdClause) *string {
	return c.Flag("clickhouse.cluster", "The ClickHouse cluster whose Distributed tables this process uses (as created by "+
		"migrate --cluster NAME); its servers' user profile must set insert_distributed_sync=1 and "+
		"distributed_product_mode='global'. Empty: a single server.").Default("").String()
}

// requireClusterSettings refuses to run against a cluster without the settings its clients
// need: without them the collector's rollups would be computed before the rows reach the shards
// and attribution's IN subqueries would be refused.
func requireClusterSettings(ctx context.Context, conn driver.Conn, cluster string) error {
	if cluster == "" {
		return nil
	}
	if err := migrations.ValidClusterName(cluster); err != nil {
		return usage.Errorf("--clickhouse.cluster: %w", err)
	}
	if err := migrations.CheckClusterSettings(ctx, conn); err != nil {
		return usage.Errorf("--clickhouse.cluster %s: %w (set them in the servers' user profile, schemas/README.md)", cluster, err)
	}
	return nil
}

// openMigrated creates the DSN's database if needed, connects and applies pending migrations
// for a single server.
func openMigrated(ctx context.Context, dsn string, logger *slog.Logger) (driver.Conn, error) {
	return openMigratedCluster(ctx, dsn, "", logger)
}

// openMigratedCluster is openMigrated for cluster ("" for a single server): the database and
// tables are created ON CLUSTER (migrations.ApplyCluster). The DSN's server is one node of the
// cluster; the database is created there first because the connection needs it.
func openMigratedCluster(ctx context.Context, dsn, cluster string, logger *slog.Logger) (driver.Conn, error) {
	if err := chconn.EnsureDatabase(ctx, dsn); err != nil {
		return nil, err
	}
	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	var applied []string
	if cluster == "" {
		applied, err = migrations.Apply(ctx, conn)
	} else {
		applied, err = migrations.ApplyCluster(ctx, conn, cluster)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	if cluster == "" {
		logger.Info("clickhouse schema up to date", "applied_now", applied)
		return conn, nil
	}
	logger.Info("clickhouse schema up to date on cluster", "cluster", cluster, "applied_now", applied)
	// The schema is in place either way; without these settings writers and readers would be
	// wrong (rollups computed before the rows arrive) or refused (IN subqueries), so say so now.
	if err := migrations.CheckClusterSettings(ctx, conn); err != nil {
		logger.Warn("clients of this cluster lack settings they need", "err", err)
	}
	return conn, nil
}
