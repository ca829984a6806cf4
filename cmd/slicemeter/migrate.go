//go:build !exporter_only

package main

import (
	"context"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/internal/usage"
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
	var dsn string
	dsnFlagVar(c, &dsn)
	return &dsn
}

// dsnFlagVar adds --clickhouse.dsn, the database a command opens with migrations.Open.
func dsnFlagVar(c *kingpin.CmdClause, into *string) {
	c.Flag("clickhouse.dsn", "ClickHouse native-protocol DSN: clickhouse://host:9000/database.").Default(migrations.DefaultDSN).StringVar(into)
}

func (c *migrateCmd) run(ctx context.Context, logger *slog.Logger) error {
	if *c.cluster != "" {
		if err := migrations.ValidClusterName(*c.cluster); err != nil {
			return usage.Errorf("--cluster: %w", err)
		}
	}
	conn, err := migrations.OpenMigrated(ctx, *c.dsn, *c.cluster, logger)
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
