package collector

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Retention says how long each table keeps its rows; 0 keeps them forever. The tables are
// partitioned by day (toYYYYMMDD(time)), and ClickHouse 18.16 has no TTL, so expiry drops
// whole day partitions, the same way on every server version: a day goes once all of it is
// older than the retention.
type Retention struct {
	Raw      time.Duration // samples
	Rollup1s time.Duration // samples_1s
	Rollup1m time.Duration // samples_1m
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
		var parts []struct {
			Partition string `ch:"partition"`
		}
		if err := conn.Select(ctx, &parts, `SELECT DISTINCT partition FROM system.parts
            WHERE database = currentDatabase() AND table = ? AND active ORDER BY partition`, t.name); err != nil {
			return dropped, fmt.Errorf("list partitions of %s: %w", t.name, err)
		}
		for _, part := range parts {
			p := part.Partition
			if !isDayPartition(p) || p > lastExpired {
				continue
			}
			// p is 8 digits (checked), so it can be part of the statement as it is.
			if err := conn.Exec(ctx, "ALTER TABLE "+t.name+" DROP PARTITION "+p); err != nil {
				return dropped, fmt.Errorf("drop partition %s of %s (retention %s): %w", p, t.name, t.keep, err)
			}
			dropped = append(dropped, t.name+"/"+p)
		}
	}
	return dropped, nil
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
