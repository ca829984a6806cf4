package allocations_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit"
)

// bulk is n allocations on targets instances of one node, back to back on each (an hour
// each), so that none overlaps: the shape of a large tenant's history.
func bulk(n, targets int) []allocation.Allocation {
	out := make([]allocation.Allocation, n)
	for i := range out {
		start := t0.Add(time.Duration(i/targets) * time.Hour)
		out[i] = allocation.Allocation{ID: fmt.Sprintf("bulk-%07d", i), Tenant: "tenant-" + strconv.Itoa(i%7), Tier: "pro",
			Node: "node-bulk", Instance: fmt.Sprintf("gpu%d/mig%d", i%targets/7, i%targets%7),
			RequestedAt: start, StartedAt: start, EndedAt: start.Add(time.Hour)}
	}
	return out
}

// bulkJSON is allocs as an allocations file: a JSON array, one object per line.
func bulkJSON(t testing.TB, allocs []allocation.Allocation) []byte {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, a := range allocs {
		line, err := json.Marshal(allocation.ToJSON(a))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		if i < len(allocs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// bulkCSV is allocs as a CSV allocations file.
func bulkCSV(allocs []allocation.Allocation) []byte {
	var b bytes.Buffer
	b.WriteString("allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n")
	for _, a := range allocs {
		j := allocation.ToJSON(a)
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%s,%s,%s\n", j.ID, j.Tenant, j.Tier, j.Node, j.Instance, j.RequestedAt, j.StartedAt, *j.EndedAt)
	}
	return b.Bytes()
}

// TestBulkImport imports 10,000 and 100,000 allocations, from JSON and CSV, through Decode
// and Store.Put against ClickHouse, then again (a retry: all unchanged). It logs the time
// of each step. SLICEMETER_BULK_BINARY=PATH also imports each file with that slicemeter
// binary into a fresh database under /usr/bin/time -v and logs its wall time and peak RSS.
func TestBulkImport(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 200,000 allocations")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		n, targets int
		format     string
	}{
		{10_000, 10_000, "json"}, // distinct targets
		{100_000, 70, "json"},    // few targets, many allocations on each
		{100_000, 70, "csv"},
	} {
		t.Run(fmt.Sprintf("%d_%s", tc.n, tc.format), func(t *testing.T) {
			allocs := bulk(tc.n, tc.targets)
			data, source := bulkJSON(t, allocs), "bulk.json"
			if tc.format == "csv" {
				data, source = bulkCSV(allocs), "bulk.csv"
			}
			if bin := os.Getenv("SLICEMETER_BULK_BINARY"); bin != "" {
				timeBinary(t, bin, data, source)
			}
			start := time.Now()
			decoded, err := allocations.Decode(source, data)
			if err != nil || len(decoded) != tc.n {
				t.Fatalf("decode: %d allocations, %v", len(decoded), err)
			}
			t.Logf("decode %d (%d MiB): %s", tc.n, len(data)>>20, time.Since(start).Round(time.Millisecond))
			store := allocations.NewStore(localtest.Database(t, localtest.DatabaseOptions{}).Conn)
			start = time.Now()
			res, err := store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, decoded)
			if err != nil || len(res.Stored) != tc.n {
				t.Fatalf("put: %d stored, %v", len(res.Stored), err)
			}
			t.Logf("put %d: %s", tc.n, time.Since(start).Round(time.Millisecond))
			start = time.Now()
			if res, err = store.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, decoded); err != nil || len(res.Unchanged) != tc.n {
				t.Fatalf("retry: %d unchanged, %v", len(res.Unchanged), err)
			}
			t.Logf("retry %d: %s", tc.n, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestBulkFirstBadLine: among 100,000 allocations, the error names the line of the first bad
// one, in JSON and CSV, however many bad ones follow.
func TestBulkFirstBadLine(t *testing.T) {
	allocs := bulk(100_000, 70)
	bad := func(a allocation.Allocation) allocation.Allocation { a.Tenant = ""; return a }
	allocs[73_455], allocs[90_000] = bad(allocs[73_455]), bad(allocs[90_000])
	for _, tc := range []struct {
		source string
		data   []byte
		want   string // the first line is "[" or the header: allocation i is on line i+2
	}{
		{"bulk.json", bulkJSON(t, allocs), "bulk.json:73457: tenant: empty"},
		{"bulk.csv", bulkCSV(allocs), "bulk.csv:73457: tenant: empty"},
	} {
		t.Run(tc.source, func(t *testing.T) {
			if _, err := allocations.Decode(tc.source, tc.data); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// timeBinary imports data with `slicemeter allocations import` into a fresh database and
// logs /usr/bin/time's wall time and peak RSS.
func timeBinary(t *testing.T, bin string, data []byte, source string) {
	file := filepath.Join(t.TempDir(), source)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	db := localtest.Database(t, localtest.DatabaseOptions{Name: localtest.DatabaseName(t) + "_binary"})
	out, err := exec.Command("/usr/bin/time", "-v", bin, "allocations", "import", "--clickhouse.dsn", db.DSN, file).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "allocations stored") || strings.Contains(line, "Elapsed (wall clock)") || strings.Contains(line, "Maximum resident") {
			t.Logf("binary: %s", strings.TrimSpace(line))
		}
	}
}
