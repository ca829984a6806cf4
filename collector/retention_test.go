package collector

import (
	"context"
	"reflect"
	"testing"
	"time"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestIsDayPartition(t *testing.T) {
	for p, want := range map[string]bool{"20260105": true, "2026010": false, "202601051": false, "2026-1-5": false, "": false, "tuple()": false} {
		if got := isDayPartition(p); got != want {
			t.Errorf("isDayPartition(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestDropExpired stores samples and rollups on four days and expires raw samples after 2
// days and rollups after 3 (seconds) and never (minutes).
func TestDropExpired(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := migratedDatabase(t, clickHouse(t), "collector_retention")
	day0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC) // partitions 20260105 .. 20260108
	var cols sampleColumns
	var tr touched
	for d := range 4 {
		ts := uint64(day0.AddDate(0, 0, d).UnixNano())
		cols.add("node-a", sample(pb.Kind_KIND_GPU, "gpu0", ts))
		tr.addNode("node-a")
		tr.addSecond(uint32(ts / 1e9))
	}
	if err := insertColumns(ctx, conn, "samples", sampleColumnNames, cols.columns()); err != nil {
		t.Fatal(err)
	}
	if err := recomputeRollups(ctx, conn, &tr); err != nil {
		t.Fatal(err)
	}
	// Now: 2026-01-09 06:00. Raw cutoff 01-07 06:00: 0105 and 0106 ended before it, 0107 did not.
	now := time.Date(2026, 1, 9, 6, 0, 0, 0, time.UTC)
	r := Retention{Raw: 48 * time.Hour, Rollup1s: 72 * time.Hour}
	dropped, err := DropExpired(ctx, conn, now, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"samples/20260105", "samples/20260106", "samples_1s/20260105"}
	if !reflect.DeepEqual(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	for table, wantRows := range map[string]uint64{"samples": 2, "samples_1s": 3, "samples_1m": 4} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != wantRows {
			t.Errorf("%s: %d rows left, want %d", table, n, wantRows)
		}
	}
	// Idempotent: nothing more to drop.
	if again, err := DropExpired(ctx, conn, now, r); err != nil || len(again) != 0 {
		t.Errorf("second DropExpired: %v, %v", again, err)
	}
}
