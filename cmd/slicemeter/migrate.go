package main

import (
	"context"
	"log/slog"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

type migrateCmd struct {
	dsn *string
}

func newMigrateCmd(app *kingpin.Application) *migrateCmd {
	c := app.Command("migrate", "Create or upgrade slicemeter's ClickHouse tables (idempotent, recorded in schema_migrations).")
	return &migrateCmd{dsn: dsnFlag(c)}
}

func dsnFlag(c *kingpin.CmdClause) *string {
	return c.Flag("clickhouse.dsn", "ClickHouse native-protocol DSN: clickhouse://host:9000/database.").Default("clickhouse://127.0.0.1:9000/slicemeter").String()
}

func (c *migrateCmd) run(ctx context.Context, logger *slog.Logger) error {
	conn, err := openMigrated(ctx, *c.dsn, logger)
	if err != nil {
		return err
	}
	return conn.Close()
}

// openMigrated creates the DSN's database if needed, connects and applies pending migrations.
func openMigrated(ctx context.Context, dsn string, logger *slog.Logger) (driver.Conn, error) {
	if err := chconn.EnsureDatabase(ctx, dsn); err != nil {
		return nil, err
	}
	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	applied, err := migrations.Apply(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	logger.Info("clickhouse schema up to date", "applied_now", applied)
	return conn, nil
}
