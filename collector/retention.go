package collector

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/migrations"
)

// Retention says how long each table keeps its rows; 0 keeps them forever. The tables are
// partitioned by day (toYYYYMMDD(time)), and ClickHouse 18.16 has no TTL, so expiry drops
// whole day partitions, the same way on every server version: a day goes once all of it is
// older than the retention. Where the server has table TTL (19.6 and later), ApplyTTL also
// sets it, so that the server expires rows between two rounds too; nothing depends on it.
type Retention struct {
	Raw      time.Duration // samples
	Rollup1s time.Duration // samples_1s
	Rollup1m time.Duration // samples_1m
	// Cluster is the ClickHouse cluster whose T_local tables (migrate --cluster) hold the
	// partitions behind the Distributed tables; "" for a single server.
	Cluster string
}

func (r Retention) enabled() bool { return r.Raw > 0 || r.Rollup1s > 0 || r.Rollup1m > 0 }

func (r Retention) tables() []struct {
	name string
	keep time.Duration
} {
	return []struct {
		name string
		keep time.Duration
	}{{"samples", r.Raw}, {"samples_1s", r.Rollup1s}, {"samples_1m", r.Rollup1m}}
}

// DropExpired drops, in every table with a retention, the day partitions that ended at or
// before now minus its retention, and returns them as "table/YYYYMMDD".
//
// On a cluster the partitions live in T_local on every shard, and a Distributed table has
// none: the days to drop are those from the oldest row (read through the Distributed table, so
// from every shard) to the last expired day, each dropped ON CLUSTER from T_local; a shard
// without that day has nothing to drop.
func DropExpired(ctx context.Context, conn driver.Conn, now time.Time, r Retention) ([]string, error) {
	var dropped []string
	for _, t := range r.tables() {
		if t.keep <= 0 {
			continue
		}
		// A day partition ends at the start of the next day; it expires when that is at or
		// before the cutoff, i.e. when the day is before the cutoff's day.
		cutoff := now.Add(-t.keep).UTC()
		lastExpired := cutoff.Truncate(24*time.Hour).AddDate(0, 0, -1).Format("20060102")
		parts, err := expiredDays(ctx, conn, t.name, lastExpired, r.Cluster)
		if err != nil {
			return dropped, err
		}
		for _, p := range parts {
			// p is 8 digits (checked), so it can be part of the statement as it is.
			stmt := "ALTER TABLE " + t.name + " DROP PARTITION " + p
			if r.Cluster != "" {
				stmt = "ALTER TABLE " + t.name + migrations.LocalSuffix + " ON CLUSTER " + r.Cluster + " DROP PARTITION " + p
			}
			if err := conn.Exec(ctx, stmt); err != nil {
				return dropped, fmt.Errorf("drop partition %s of %s (retention %s): %w", p, t.name, t.keep, err)
			}
			dropped = append(dropped, t.name+"/"+p)
		}
	}
	return dropped, nil
}

// expiredDays are table's day partitions up to lastExpired (YYYYMMDD), in order.
func expiredDays(ctx context.Context, conn driver.Conn, table, lastExpired, cluster string) ([]string, error) {
	var days []string
	if cluster == "" {
		var parts []struct {
			Partition string `ch:"partition"`
		}
		if err := conn.Select(ctx, &parts, `SELECT DISTINCT partition FROM system.parts
            WHERE database = currentDatabase() AND table = ? AND active ORDER BY partition`, table); err != nil {
			return nil, fmt.Errorf("list partitions of %s: %w", table, err)
		}
		for _, part := range parts {
			if isDayPartition(part.Partition) && part.Partition <= lastExpired {
				days = append(days, part.Partition)
			}
		}
		return days, nil
	}
	var rows, oldest uint64
	if err := conn.QueryRow(ctx, "SELECT count(), toUInt64(toYYYYMMDD(min(time))) FROM "+table).Scan(&rows, &oldest); err != nil {
		return nil, fmt.Errorf("find the oldest day of %s: %w", table, err)
	}
	if rows == 0 {
		return nil, nil
	}
	day, err := time.Parse("20060102", strconv.FormatUint(oldest, 10))
	if err != nil {
		return nil, fmt.Errorf("the oldest day of %s: %w", table, err)
	}
	for ; ; day = day.AddDate(0, 0, 1) {
		p := day.Format("20060102")
		if p > lastExpired {
			return days, nil
		}
		days = append(days, p)
	}
}

// ApplyTTL sets, on a server that has table TTL (19.6 and later) and for every table with a
// retention, a TTL one day past it (whole day partitions expire first through DropExpired; the
// TTL only catches what a stopped collector left behind). It does nothing on older servers,
// 18.16 included, and on a cluster (where it would have to reach every T_local ON CLUSTER),
// and says whether it set anything.
func ApplyTTL(ctx context.Context, conn driver.Conn, r Retention) (bool, error) {
	if r.Cluster != "" || !r.enabled() {
		return false, nil
	}
	var version string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return false, fmt.Errorf("read the server version: %w", err)
	}
	if !hasTTL(version) {
		return false, nil
	}
	for _, stmt := range ttlStatements(r) {
		if err := conn.Exec(ctx, stmt); err != nil {
			return false, fmt.Errorf("set retention TTL (%s): %w", stmt, err)
		}
	}
	return true, nil
}

// ttlStatements are ApplyTTL's statements.
func ttlStatements(r Retention) []string {
	var out []string
	for _, t := range r.tables() {
		if t.keep > 0 {
			out = append(out, fmt.Sprintf("ALTER TABLE %s MODIFY TTL time + toIntervalSecond(%d)", t.name, int64((t.keep+24*time.Hour)/time.Second)))
		}
	}
	return out
}

// hasTTL says whether a server of this version() has table TTL (ClickHouse 19.6 and later).
func hasTTL(version string) bool {
	major, rest, _ := strings.Cut(version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > 19 || ma == 19 && mi >= 6
}

func isDayPartition(p string) bool {
	if len(p) != 8 {
		return false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// runRetention applies c.cfg.Retention now and then every RetentionInterval until ctx is done.
// A failure is logged and counted; the next round tries again.
func (c *Collector) runRetention(ctx context.Context) {
	if set, err := ApplyTTL(ctx, c.conn, c.cfg.Retention); err != nil {
		c.metrics.retentionErrors.Inc()
		c.log.Warn("retention TTL not set; expired partitions are still dropped", "err", err)
	} else if set {
		c.log.Info("retention TTL set on the tables (the server supports it)")
	}
	for {
		dropped, err := DropExpired(ctx, c.conn, time.Now(), c.cfg.Retention)
		for range dropped {
			c.metrics.partitionsDropped.Inc()
		}
		if len(dropped) > 0 {
			c.log.Info("expired partitions dropped", "partitions", dropped)
		}
		if err != nil && ctx.Err() == nil {
			c.metrics.retentionErrors.Inc()
			c.log.Warn("retention", "err", err)
		}
		t := time.NewTimer(c.cfg.RetentionInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
