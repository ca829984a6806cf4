package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/audit"
)

// auditEntries is what memAudit holds: a create of a1 (acme) and the move of b1 from beta to
// acme.
var auditEntries = []audit.Entry{
	{At: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), Actor: audit.Actor{Door: audit.DoorHTTP, Principal: "op", Role: "operator"},
		Action: audit.ActionCreate, AllocationID: "a1", Tenant: "acme", Version: 1, After: `{"allocation_id":"a1","tenant":"acme"}`},
	{At: time.Date(2026, 1, 5, 1, 0, 0, 0, time.UTC), Actor: audit.Actor{Door: audit.DoorKafka, Origin: "t/0@7"},
		Action: audit.ActionChange, AllocationID: "b1", Tenant: "beta", BeforeTenant: "beta", Version: 2,
		Before: `{"allocation_id":"b1","tenant":"beta"}`, After: `{"allocation_id":"b1","tenant":"beta"}`},
}

// memAudit filters auditEntries as audit.List does; its query is recorded in lastAuditQuery.
func memAudit(_ context.Context, q audit.Query) ([]audit.Entry, error) {
	lastAuditQuery = q
	var out []audit.Entry
	for _, e := range auditEntries {
		if (q.From.IsZero() || !e.At.Before(q.From)) && (q.To.IsZero() || e.At.Before(q.To)) &&
			(q.AllocationID == "" || e.AllocationID == q.AllocationID) && (q.Tenant == "" || e.Tenant == q.Tenant || e.BeforeTenant == q.Tenant) {
			out = append(out, e)
		}
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

var lastAuditQuery audit.Query

// memPeriods has 2026-01 closed; closing it again is refused, 2026-03 is not over.
type memPeriods struct{}

func (memPeriods) List(context.Context) ([]period.Closed, error) {
	return []period.Closed{{Period: period.Month{Year: 2026, Month: 1}, Version: 1, Currency: "USD", Cost: decimal.RequireFromString("12.5")}}, nil
}

func (memPeriods) Close(_ context.Context, m period.Month, _ time.Time) (period.Closed, error) {
	switch m.String() {
	case "2026-01":
		return period.Closed{}, fmt.Errorf("close %s: %w", m, period.ErrClosed)
	case "2026-03":
		return period.Closed{}, fmt.Errorf("close %s: %w", m, period.ErrNotOver)
	case "2025-12":
		return period.Closed{}, fmt.Errorf("close %s: 5 of its minutes are %w", m, stored.ErrNotAttributed)
	case "2025-11":
		return period.Closed{}, fmt.Errorf("close %s: the database is gone", m)
	}
	return period.Closed{Period: m, Version: 1, Currency: "USD", Cost: decimal.RequireFromString("3")}, nil
}

// lastFOCUSVersion is the focus_version= of the last close through CloseFOCUS.
var lastFOCUSVersion focus.Version

func (p memPeriods) CloseFOCUS(ctx context.Context, m period.Month, now time.Time, v focus.Version) (period.Closed, error) {
	lastFOCUSVersion = v
	return p.Close(ctx, m, now)
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAudit: the audit route passes its filters to the AuditLog, answers the entries as JSON
// (before and after as objects, null where none), and refuses bad times and too many entries.
func TestAudit(t *testing.T) {
	srv := newServer(&memStore{})
	defer srv.Close()
	tests := []struct {
		name, query string
		status      int
		want        []string
		ids         []string
	}{
		{"all", "", 200, []string{`"before":null`, `"after":{"allocation_id":"a1","tenant":"acme"}`, `"door":"kafka"`, `"origin":"t/0@7"`}, []string{"a1", "b1"}},
		{"by id", "?allocation_id=b1", 200, nil, []string{"b1"}},
		{"by tenant", "?tenant=acme", 200, nil, []string{"a1"}},
		{"by time", "?from=2026-01-05T00:30:00Z&to=2026-01-05T02:00:00Z", 200, nil, []string{"b1"}},
		{"none", "?allocation_id=zz", 200, []string{"[]"}, nil},
		{"by dates", "?from=2026-01-05&to=2026-01-06", 200, nil, []string{"a1", "b1"}}, // midnight UTC, as the CLI's --from
		{"bad from", "?from=yesterday", 400, []string{"query parameter from", "RFC 3339", "or a date such as 2026-01-05"}, nil},
		{"reversed", "?from=2026-01-06T00:00:00Z&to=2026-01-05T00:00:00Z", 400, []string{"must be after"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := get(t, "GET", srv.URL+"/api/v1/audit"+tt.query)
			if code != tt.status {
				t.Fatalf("status %d, want %d: %s", code, tt.status, b)
			}
			for _, w := range tt.want {
				if !strings.Contains(b, w) {
					t.Errorf("answer lacks %q: %s", w, b)
				}
			}
			if code != 200 {
				return
			}
			var got []audit.JSON
			if err := json.Unmarshal([]byte(b), &got); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, e := range got {
				ids = append(ids, e.AllocationID)
			}
			if strings.Join(ids, ",") != strings.Join(tt.ids, ",") {
				t.Errorf("entries %v, want %v", ids, tt.ids)
			}
		})
	}
	if lastAuditQuery.Limit != DefaultReportLimits().MaxAuditRows+1 {
		t.Errorf("the audit query's limit is %d, want the default limit + 1", lastAuditQuery.Limit)
	}
}

// TestAuditRowLimit: more entries than --api.max-audit-rows is a 400 naming the limit;
// exactly the limit is served.
func TestAuditRowLimit(t *testing.T) {
	for _, tt := range []struct {
		limit, status int
	}{{1, 400}, {2, 200}, {0, 200}} {
		s := &Server{Auth: AllowAll{}, Audit: memAudit, Limits: &ReportLimits{MaxAuditRows: tt.limit}}
		mux := http.NewServeMux()
		s.Register(mux)
		req, _ := http.NewRequest("GET", "/api/v1/audit", nil)
		w := &recorder{header: http.Header{}}
		mux.ServeHTTP(w, req)
		if w.status != tt.status {
			t.Errorf("limit %d: status %d, want %d: %s", tt.limit, w.status, tt.status, w.body.String())
		}
		if tt.status == 400 && !strings.Contains(w.body.String(), "--api.max-audit-rows") {
			t.Errorf("limit %d: the 400 does not name the limit: %s", tt.limit, w.body.String())
		}
	}
}

// recorder is a minimal http.ResponseWriter.
type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(s int) { r.status = s }

// TestPostRecordsWho: a POST stores as the authenticated principal, through the http door,
// from the client's address.
func TestPostRecordsWho(t *testing.T) {
	store := &memStore{}
	srv := newServer(store)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/allocations", strings.NewReader(body))
	req.Header.Set("X-Tenant", "scheduler")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(store.by) != 1 {
		t.Fatalf("status %d, %d puts", resp.StatusCode, len(store.by))
	}
	if who := store.by[0]; who.Door != audit.DoorHTTP || who.Principal != "scheduler" || who.Role != "scheduler" || !strings.HasPrefix(who.Origin, "127.0.0.1:") {
		t.Errorf("stored as %+v, want the scheduler through http from 127.0.0.1", who)
	}
}

// TestPeriods: listing and closing billing periods, and what a refused close answers.
func TestPeriods(t *testing.T) {
	srv := newServer(&memStore{})
	defer srv.Close()
	tests := []struct {
		name, method, path string
		status             int
		want               []string
	}{
		{"list", "GET", "/api/v1/periods", 200, []string{`"period":"2026-01"`, `"cost":"12.500000"`, `"currency":"USD"`}},
		{"close", "POST", "/api/v1/periods/2026-02/close", 200, []string{`"period":"2026-02"`, `"cost":"3.000000"`}},
		{"closed already", "POST", "/api/v1/periods/2026-01/close", 409, []string{"closed already"}},
		{"not over", "POST", "/api/v1/periods/2026-03/close", 409, []string{"not over"}},
		{"not attributed", "POST", "/api/v1/periods/2025-12/close", 409, []string{"not attributed yet"}},
		{"failed", "POST", "/api/v1/periods/2025-11/close", 500, []string{"error_id"}},
		{"bad month", "POST", "/api/v1/periods/2026-13/close", 400, []string{`2026-13`, "YYYY-MM"}},
		{"get close", "GET", "/api/v1/periods/2026-02/close", 405, nil},
		{"close, FOCUS 1.2 files", "POST", "/api/v1/periods/2026-02/close?focus_version=1.2", 200, []string{`"period":"2026-02"`}},
		{"close, bad focus_version", "POST", "/api/v1/periods/2026-02/close?focus_version=2.0", 400, []string{"focus_version", `2.0`, "expected 1.3 or 1.2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := get(t, tt.method, srv.URL+tt.path)
			if code != tt.status {
				t.Fatalf("status %d, want %d: %s", code, tt.status, b)
			}
			for _, w := range tt.want {
				if !strings.Contains(b, w) {
					t.Errorf("answer lacks %q: %s", w, b)
				}
			}
			if strings.Contains(tt.path, "focus_version=1.2") && lastFOCUSVersion != focus.Focus12 {
				t.Errorf("closed with FOCUS files of version %q, want 1.2", lastFOCUSVersion)
			}
		})
	}
}
