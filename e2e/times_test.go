package e2e

import (
	"context"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestTimesAndVersionsCheckedAtTheDoors runs the real binary against a real ClickHouse: an
// allocation whose times lie past 2262 (where nanoseconds wrap) or in 9999 is refused by
// `allocations import` (CSV and JSON) and by POST /api/v1/allocations, naming the field and
// quoting the time as given, and nothing is stored; an allocation stored at the top of UInt64
// (a Kafka event before the collector refused such versions) is not "stored" by a POST that
// cannot be ordered after it: 409 naming its version, and ClickHouse keeps its state.
// Before, 2610-09-01 was imported as 2026-02-10 (exit 0), 9999 was refused quoting
// "1816-03-30", and the POST answered 200 "stored" while writing version 0.
func TestTimesAndVersionsCheckedAtTheDoors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := localtest.Database(t, localtest.DatabaseOptions{Name: "e2e_times", Unmigrated: true})
	apptest.Migrate(t, ctx, db.DSN)
	const (
		header    = "allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n"
		rangeText = "expected a time from 2000-01-01T00:00:00Z to 2106-02-07T06:28:15Z"
	)
	dir := t.TempDir()
	for name, tc := range map[string]struct{ content, want string }{
		"far.csv": {header + "far-1,acme,pro,node-a,gpu0,2610-09-01T00:00:00Z,2610-09-01T00:00:00Z,2610-09-01T01:00:00Z\n",
			`far.csv:2: requested_at: "2610-09-01T00:00:00Z"; ` + rangeText},
		"end.json": {`[{"allocation_id": "far-2", "tenant": "acme", "tier": "pro", "node": "node-a", "instance_id": "gpu0",
  "requested_at": "2026-01-05T00:00:00Z", "started_at": "2026-01-05T00:00:00Z", "ended_at": "9999-12-31T00:00:00Z"}]`,
			`end.json:1: ended_at: "9999-12-31T00:00:00Z"; ` + rangeText},
	} {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := apptest.Run(t, ctx, "allocations", "import", "--clickhouse.dsn", db.DSN, file)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) || strings.Contains(r.Stderr, "1816") {
			t.Errorf("import %s exited %d, want 2 and %q:\n%s%s", name, r.Code, tc.want, r.Stdout, r.Stderr)
		}
	}
	if n := queryUint(t, ctx, db.Conn, "SELECT count() FROM allocations"); n != 0 {
		t.Errorf("%d allocations stored by the refused imports, want none", n)
	}

	// An allocation stored at version 2^64-1, as a Kafka event could store it before.
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	ins, err := db.Conn.PrepareBatch(ctx, tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		t.Fatal(err)
	}
	if err := ins.Append("frozen", "acme", "pro", "node-a", "gpu1", start.UnixNano(), start.UnixNano(), int64(0), uint64(math.MaxUint64), uint8(0), start); err != nil {
		t.Fatal(err)
	}
	if err := ins.Send(); err != nil {
		t.Fatal(err)
	}

	svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", db.DSN, "--pricebook", faultPriceBook)
	post := func(body string) (int, string) {
		t.Helper()
		began := time.Now()
		resp, err := http.Post(svc.URL("/api/v1/allocations"), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		t.Logf("POST answered %d in %s", resp.StatusCode, time.Since(began))
		return resp.StatusCode, string(b)
	}
	code, body := post(`{"allocation_id": "far-3", "tenant": "acme", "tier": "pro", "node": "node-a", "instance_id": "gpu0",
  "requested_at": "2026-01-05T00:00:00Z", "started_at": "2610-08-01T00:00:00Z"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `started_at: \"2610-08-01T00:00:00Z\"`) || !strings.Contains(body, "2106-02-07T06:28:15Z") {
		t.Errorf("POST started in 2610: %d %s; want 400 naming started_at and quoting the time", code, body)
	}
	code, body = post(`{"allocation_id": "frozen", "tenant": "acme", "tier": "pro", "node": "node-a", "instance_id": "gpu1",
  "requested_at": "2026-01-05T00:00:00Z", "started_at": "2026-01-05T00:00:00Z", "ended_at": "2026-01-05T01:00:00Z"}`)
	if code != http.StatusConflict || strings.Contains(body, "stored") && !strings.Contains(body, "is stored at version") || !strings.Contains(body, "18446744073709551615") {
		t.Errorf("POST a change after version 2^64-1: %d %s; want 409 naming the version, never stored", code, body)
	}
	if n := queryUint(t, ctx, db.Conn, "SELECT count() FROM allocations"); n != 1 {
		t.Errorf("%d allocation rows, want only the frozen one", n)
	}
	if n := queryUint(t, ctx, db.Conn, "SELECT count() FROM allocation_audit"); n != 0 {
		t.Errorf("%d audit entries, want none (nothing was changed)", n)
	}
}
