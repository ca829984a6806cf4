package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/audit"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestAllocationAudit writes allocations through every door of the real binaries — the
// attribution API (a scheduler's create, an operator's move), `allocations import`, and the
// allocations topic through the collector (a fake Kafka) — and reads the audit trail back
// through GET /api/v1/audit: one entry per write with its door, principal, origin and the
// row before and after. A scheduler's move to another tenant is a 403 and neither applied
// nor recorded; a tenant and a scheduler may not read the trail (403).
func TestAllocationAudit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tokens := map[string]string{"ops": "audit-ops-0123456789abcdef", "books": "audit-books-0123456789abcdef",
		"k8s": "audit-k8s-0123456789abcdef", "acme": "audit-acme-0123456789abcdef"}
	roles := map[string]string{"ops": "operator", "books": "finance", "k8s": "scheduler", "acme": "tenant"}
	var content strings.Builder
	content.WriteString("tokens:\n")
	for _, name := range []string{"ops", "books", "k8s", "acme"} {
		apptest.Secret(t, tokens[name])
		r := apptest.RunInput(t, ctx, tokens[name]+"\n", "api", "token", "hash", "--name", name)
		if r.Code != 0 {
			t.Fatalf("api token hash exited %d:\n%s", r.Code, r.Stderr)
		}
		e := strings.Replace(r.Stdout, "role: tenant ", "role: "+roles[name]+" ", 1)
		if name == "acme" {
			e = strings.Replace(e, "[TENANT]", "[acme]", 1)
		} else {
			e = strings.Replace(e, "    tenants: [TENANT]     # for tenant; optional for scheduler\n", "", 1)
		}
		content.WriteString(e)
	}
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(authFile, []byte(content.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	db := localtest.Database(t, localtest.DatabaseOptions{})
	brokers := localtest.FakeKafka(t)
	svc := apptest.StartAttribution(t, ctx, "--api.auth-file", authFile, "--clickhouse.dsn", db.DSN, "--scenario", filepath.Join(scenarios, "mig-basic.yaml"))
	col := apptest.StartCollector(t, ctx, "--kafka.brokers", strings.Join(brokers, ","), "--clickhouse.dsn", db.DSN, "--collector.flush-interval", "200ms")

	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, svc.URL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokens[token])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const at = "2026-01-05T00:00:00Z"
	alloc := func(id, tenant, instance string) string {
		return `{"allocation_id": "` + id + `", "tenant": "` + tenant + `", "tier": "pro", "node": "node-a", "instance_id": "` + instance +
			`", "requested_at": "` + at + `", "started_at": "` + at + `", "ended_at": null}`
	}
	// HTTP: the scheduler creates, may not move; the operator moves.
	if code, b := do("POST", "/api/v1/allocations", "k8s", alloc("au-http", "delta", "gpu0/mig1")); code != 200 {
		t.Fatalf("scheduler's create: %d %s", code, b)
	}
	if code, b := do("POST", "/api/v1/allocations", "k8s", alloc("au-http", "acme", "gpu0/mig1")); code != 403 || !strings.Contains(b, "operator") {
		t.Errorf("scheduler's move: %d %s, want 403 naming the operator role", code, b)
	}
	if code, b := do("GET", "/api/v1/allocations?tenant=delta", "ops", ""); code != 200 || !strings.Contains(b, `"au-http"`) {
		t.Errorf("after the refused move, delta's allocations: %d %s; want au-http still delta's", code, b)
	}
	if code, b := do("POST", "/api/v1/allocations", "ops", alloc("au-http", "acme", "gpu0/mig1")); code != 200 {
		t.Fatalf("operator's move: %d %s", code, b)
	}
	// Import.
	file := filepath.Join(dir, "allocs.json")
	if err := os.WriteFile(file, []byte(alloc("au-import", "beta", "gpu0/mig2")), 0o600); err != nil {
		t.Fatal(err)
	}
	apptest.MustRun(t, ctx, "allocations", "import", "--clickhouse.dsn", db.DSN, file)
	// Kafka.
	value, err := proto.Marshal(&pb.AllocationEvent{AllocationId: "au-kafka", Tenant: "gamma", Tier: "pro", Node: "node-a", InstanceId: "gpu1",
		RequestedAtNs: 1_767_571_200e9, StartedAtNs: 1_767_571_200e9, Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter("", nil)
	if err := w.WriteMessages(ctx, kafka.Message{Topic: pb.TopicAllocations, Key: []byte("gamma"), Value: value}); err != nil {
		t.Fatal(err)
	}
	w.Close()

	var entries []audit.JSON
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, b := do("GET", "/api/v1/audit", "books", "")
		if code != 200 {
			t.Fatalf("finance reads the audit trail: %d %s", code, b)
		}
		if err := json.Unmarshal([]byte(b), &entries); err != nil {
			t.Fatal(err)
		}
		if len(entries) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d audit entries, want 4: %s\ncollector:\n%s", len(entries), b, col.LogTail(30))
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := []struct {
		door                            audit.Door
		principal, role, origin, action string
		id, tenant, beforeTenant        string
		before, after                   bool
	}{
		{audit.DoorHTTP, "k8s", "scheduler", "127.0.0.1:", "create", "au-http", "delta", "", false, true},
		{audit.DoorHTTP, "ops", "operator", "127.0.0.1:", "change", "au-http", "acme", "delta", true, true},
		{audit.DoorImport, u.Username, "cli", host + ":" + file, "create", "au-import", "beta", "", false, true},
		{audit.DoorKafka, "", "", pb.TopicAllocations + "/0@0", "create", "au-kafka", "gamma", "", false, true},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d audit entries, want %d: %+v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		if e.Door != w.door || e.Principal != w.principal || e.Role != w.role || !strings.HasPrefix(e.Origin, w.origin) || string(e.Action) != w.action ||
			e.AllocationID != w.id || e.Tenant != w.tenant || e.BeforeTenant != w.beforeTenant ||
			(string(e.Before) != "null") != w.before || (string(e.After) != "null") != w.after {
			t.Errorf("entry %d: %+v\nwant %+v", i, e, w)
		}
	}
	if !strings.Contains(string(entries[1].Before), `"tenant":"delta"`) || !strings.Contains(string(entries[1].After), `"tenant":"acme"`) {
		t.Errorf("the move's before and after: %s → %s", entries[1].Before, entries[1].After)
	}
	for _, tt := range []struct {
		token, query string
		status, n    int
	}{
		{"ops", "?allocation_id=au-http", 200, 2},
		{"books", "?tenant=delta", 200, 2}, // the create, and the move away
		{"books", "?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z", 200, 0},
		{"acme", "", 403, 0},
		{"k8s", "", 403, 0},
	} {
		code, b := do("GET", "/api/v1/audit"+tt.query, tt.token, "")
		var got []audit.JSON
		if code != tt.status || code == 200 && (json.Unmarshal([]byte(b), &got) != nil || len(got) != tt.n) {
			t.Errorf("%s: GET /api/v1/audit%s: %d with %d entries, want %d with %d: %s", tt.token, tt.query, code, len(got), tt.status, tt.n, b)
		}
	}
	// Periods: finance lists them (none closed) and may close one; a tenant may do neither.
	if code, b := do("GET", "/api/v1/periods", "books", ""); code != 200 || strings.TrimSpace(b) != "[]" {
		t.Errorf("finance lists the periods: %d %s, want 200 []", code, b)
	}
	// The service has attributed none of 2025-12's minutes (it holds no samples): not yet.
	if code, b := do("POST", "/api/v1/periods/2025-12/close", "books", ""); code != 409 || !strings.Contains(b, "44640 minutes are not attributed yet") {
		t.Errorf("finance closes 2025-12: %d %s, want 409 naming the minutes not attributed", code, b)
	}
	for _, path := range []string{"GET /api/v1/periods", "POST /api/v1/periods/2026-01/close"} {
		method, p, _ := strings.Cut(path, " ")
		if code, b := do(method, p, "acme", ""); code != 403 {
			t.Errorf("a tenant: %s: %d %s, want 403", path, code, b)
		}
	}
}
