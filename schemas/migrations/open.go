package migrations

import (
	"context"
	"log/slog"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// OpenMigrated creates the DSN's database if needed, connects and applies pending migrations,
// for cluster ("" for a single server): then the database and tables are created ON CLUSTER
// (ApplyCluster). The DSN's server is one node of the cluster; the database is created there
// first because the connection needs it. A database that records a migration this build does
// not know is refused before anything is applied, and the schema is checked after (CheckSchema):
// both are usage errors. The collector and `slicemeter migrate` start with it.
func OpenMigrated(ctx context.Context, dsn, cluster string, logger *slog.Logger) (driver.Conn, error) {
	if err := chconn.EnsureDatabase(ctx, dsn); err != nil {
		return nil, err
	}
	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := refuseUnknown(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	var applied []string
	if cluster == "" {
		applied, err = Apply(ctx, conn)
	} else {
		applied, err = ApplyCluster(ctx, conn, cluster)
	}
	if err == nil {
		err = CheckSchema(ctx, conn)
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
	if err := CheckClusterSettings(ctx, conn); err != nil {
		logger.Warn("clients of this cluster lack settings they need", "err", err)
	}
	return conn, nil
}

// Open connects to the DSN's database without migrating it and checks its schema
// (CheckSchema): the attribution service and the commands that read or write ClickHouse start
// with it, so that a newer, damaged or unmigrated schema is exit 2 naming the migration or
// column instead of a failure at every query.
func Open(ctx context.Context, dsn string) (driver.Conn, error) {
	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := CheckSchema(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// RequireClusterSettings refuses to run against a cluster without the settings its clients
// need: without them the collector's rollups would be computed before the rows reach the shards
// and attribution's IN subqueries would be refused. Its errors are usage errors (exit status
// 2) naming the services' flag --clickhouse.cluster; nil for a single server ("").
func RequireClusterSettings(ctx context.Context, conn driver.Conn, cluster string) error {
	if cluster == "" {
		return nil
	}
	if err := ValidClusterName(cluster); err != nil {
		return usage.Errorf("--clickhouse.cluster: %w", err)
	}
	if err := CheckClusterSettings(ctx, conn); err != nil {
		return usage.Errorf("--clickhouse.cluster %s: %w (set them in the servers' user profile, schemas/README.md)", cluster, err)
	}
	return nil
}
