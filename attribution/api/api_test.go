package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit"
)

// memStore is an in-memory AllocationStore: the HTTP layer is under test, not ClickHouse.
type memStore struct {
	allocs []allocation.Allocation
	put    func([]allocation.Allocation) (allocations.Result, error)
	by     []audit.Actor // who each PutChecked was by
}

func (m *memStore) PutChecked(_ context.Context, who audit.Actor, allocs []allocation.Allocation, check allocations.Check) (allocations.Result, error) {
	m.by = append(m.by, who)
	if m.put != nil {
		return m.put(allocs)
	}
	for _, a := range allocs {
		for _, prev := range m.allocs {
			if prev.ID == a.ID && check != nil {
				if err := check(prev, a); err != nil {
					return allocations.Result{}, err
				}
			}
		}
	}
	m.allocs = append(m.allocs, allocs...)
	var r allocations.Result
	for _, a := range allocs {
		r.Stored = append(r.Stored, a.ID)
	}
	return r, nil
}

func (m *memStore) List(_ context.Context, tenant string, _, _ time.Time) ([]allocation.Allocation, error) {
	var out []allocation.Allocation
	for _, a := range m.allocs {
		if tenant == "" || a.Tenant == tenant {
			out = append(out, a)
		}
	}
	return out, nil
}

// headerAuth takes the principal from a header, a stand-in for package auth: "" is an
// operator, "ROLE:T1,T2" a role with tenants, "ROLE" a role without, any other word a tenant
// principal of that tenant, "nobody" is refused.
type headerAuth struct{}

func (headerAuth) Principal(r *http.Request) (Principal, error) {
	h := r.Header.Get("X-Tenant")
	role, tenants, withTenants := strings.Cut(h, ":")
	switch {
	case h == "nobody":
		return Principal{}, errors.New("unknown caller")
	case h == "":
		return Principal{Name: "op", Role: RoleOperator}, nil
	case withTenants:
		return Principal{Name: h, Role: Role(role), Tenants: strings.Split(tenants, ",")}, nil
	case slices.Contains(Roles(), Role(h)):
		return Principal{Name: h, Role: Role(h)}, nil
	}
	return Principal{Name: h, Role: RoleTenant, Tenants: []string{h}}, nil
}

const body = `[{"allocation_id": "a1", "tenant": "acme", "tier": "pro", "node": "n", "instance_id": "gpu0",
  "requested_at": "2026-01-05T00:00:00Z", "started_at": "2026-01-05T00:00:10Z", "ended_at": null}]`

func newServer(store *memStore) *httptest.Server {
	s := &Server{
		Store: store,
		Auth:  headerAuth{},
		Report: func(_ context.Context, q ReportQuery) (report.Report, error) {
			from, to := q.From, q.To
			neighbour := ""
			if q.Neighbours {
				neighbour = "acme"
			}
			if q.FromMinutes {
				neighbour = "minutes"
			}
			rep := report.Report{WindowStart: from, WindowEnd: to, Currency: "USD", UnallocatedListCost: 1,
				Tenants: []report.Row{
					{Tenant: "acme", Tier: "pro", WindowStart: from, WindowEnd: to, Cost: to.Sub(from).Hours(), Currency: "USD"},
					{Tenant: "beta", Tier: "pro", WindowStart: from, WindowEnd: to, Cost: 2, Currency: "USD", NoisyNeighbour: neighbour},
				}}
			if q.Lines {
				for _, r := range rep.Tenants {
					rep.Allocations = append(rep.Allocations, report.AllocationRow{Tenant: r.Tenant, AllocationID: r.Tenant[:1] + "1", Tier: r.Tier,
						WindowStart: from, WindowEnd: to, Node: "n", Instance: "gpu0", Kind: "gpu", Model: "A100-SXM4-40GB", Fraction: 1,
						Allocated: to.Sub(from), Cost: r.Cost, ListCost: r.Cost, Currency: "USD"})
				}
			}
			return rep, nil
		},
		Metrics: allocations.NewMetrics(prometheus.NewRegistry()),
		Tiers:   map[string]float64{"pro": 1, "budget": 0.7},
		Audit:   memAudit,
		Periods: memPeriods{},
		Statement: func(_ context.Context, tenant string, m period.Month) ([]byte, error) {
			return []byte("<p>statement of " + tenant + " for " + m.String() + "</p>"), nil
		},
	}
	mux := http.NewServeMux()
	s.Register(mux)
	return httptest.NewServer(mux)
}

func TestAPI(t *testing.T) {
	store := &memStore{}
	srv := newServer(store)
	defer srv.Close()
	tests := []struct {
		name, method, path, tenant, body string
		status                           int
		want                             []string
		not                              []string
	}{
		{"post", "POST", "/api/v1/allocations", "", body, 200, []string{`"stored":["a1"]`}, nil},
		{"post malformed", "POST", "/api/v1/allocations", "", "[\n{\"tenant\": 1}]", 400, []string{"request:2", "tenant"}, nil},
		{"post unknown tier", "POST", "/api/v1/allocations", "", strings.Replace(body, `"pro"`, `"gold"`, 1), 400, []string{`tier: \"gold\"`, "budget, pro"}, nil},
		{"post reserved tenant", "POST", "/api/v1/allocations", "", strings.Replace(body, `"acme"`, `"__unallocated__"`, 1), 400, []string{`tenant: \"__unallocated__\"`, "not starting with _"}, nil},
		{"post formula tenant", "POST", "/api/v1/allocations", "", strings.Replace(body, `"acme"`, `"=HYPERLINK(1)"`, 1), 400, []string{`tenant: \"=HYPERLINK(1)\"`}, nil},
		{"post as a tenant", "POST", "/api/v1/allocations", "acme", body, 403, []string{`acme (role tenant, tenants acme) may not write allocations`}, nil},
		{"unauthenticated", "GET", "/api/v1/allocations", "nobody", "", 401, []string{"unknown caller"}, nil},
		{"list", "GET", "/api/v1/allocations?tenant=acme", "", "", 200, []string{`"allocation_id":"a1"`, `"ended_at":null`}, nil},
		{"list own", "GET", "/api/v1/allocations", "acme", "", 200, []string{`"a1"`}, nil},
		{"list other tenant", "GET", "/api/v1/allocations?tenant=acme", "beta", "", 403, []string{`beta (role tenant, tenants beta) may not read allocations of tenant \"acme\"`}, nil},
		{"list bad time", "GET", "/api/v1/allocations?from=yesterday", "", "", 400, []string{"from", "yesterday"}, nil},
		{"report csv", "GET", "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T02:00:00Z&step=1h", "", "", 200,
			[]string{"tenant,tier,window_start", "acme,pro,2026-01-05T01:00:00Z,2026-01-05T02:00:00Z", "__unallocated__,,2026-01-05T01:00:00Z"}, nil},
		{"report json of a tenant", "GET", "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T02:00:00Z&format=json", "beta", "", 200,
			[]string{`"tenant": "beta"`, `"cost": 2.000000`, `"noisy_neighbour": "another tenant"`}, []string{`"acme"`, "__unallocated__"}},
		{"report from minutes", "GET", "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T02:00:00Z&format=json&source=minutes", "", "", 200,
			[]string{`"noisy_neighbour": "minutes"`}, nil},
		{"report bad source", "GET", "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T02:00:00Z&source=cache", "", "", 400, []string{`\"cache\"`}, nil},
		{"report other tenant", "GET", "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T02:00:00Z&tenant=acme", "beta", "", 403, nil, nil},
		{"report no window", "GET", "/api/v1/report", "", "", 400, []string{"from: missing"}, nil},
		{"report bad step", "GET", "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T02:00:00Z&step=fortnight", "", "", 400, []string{`\"fortnight\"`}, nil},
		{"report bad format", "GET", "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T02:00:00Z&format=xml", "", "", 400, []string{`\"xml\"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("X-Tenant", tt.tenant)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("response lacks %s:\n%s", w, b)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(string(b), n) {
					t.Errorf("response has %s:\n%s", n, b)
				}
			}
		})
	}
}

// TestPostRefusalsCountedByReason: a POST the validator refuses is counted under the
// validator's reason (a reserved tenant, an unknown tier: invalid; no tenant: missing_tenant),
// one that is not allocations at all under malformed.
func TestPostRefusalsCountedByReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := &Server{Store: &memStore{}, Auth: AllowAll{}, Metrics: allocations.NewMetrics(reg), Tiers: map[string]float64{"pro": 1}}
	srv := httptest.NewServer(http.HandlerFunc(s.postAllocations))
	defer srv.Close()
	for _, b := range []string{
		strings.Replace(body, `"acme"`, `"__unallocated__"`, 1),
		strings.Replace(body, `"pro"`, `"gold"`, 1),
		strings.Replace(body, `"acme"`, `""`, 1),
		"[{",
		body,
	} {
		resp, err := http.Post(srv.URL+"/api/v1/allocations", "application/json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "slicemeter_allocations_refused_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"invalid": 2, "missing_tenant": 1, "malformed": 1, "conflict": 0, "forbidden": 0,
		"missing_allocation_id": 0, "missing_tier": 0, "missing_node": 0, "missing_instance_id": 0,
		"started_before_requested": 0, "ended_not_after_started": 0}
	if !maps.Equal(got, want) {
		t.Errorf("slicemeter_allocations_refused_total by reason: %v, want %v", got, want)
	}
}

func TestPostConflict(t *testing.T) {
	store := &memStore{put: func([]allocation.Allocation) (allocations.Result, error) {
		return allocations.Result{}, fmt.Errorf("%w: allocation \"a1\" overlaps allocation \"a0\"", allocations.ErrRefused)
	}}
	srv := newServer(store)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/api/v1/allocations", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), `\"a0\"`) {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
}

// TestPostBulk: 100,000 allocations fit in one request under the default limit; a body over
// the limit is refused with 413 naming it.
func TestPostBulk(t *testing.T) {
	var b strings.Builder
	b.WriteString("[\n")
	for i := range 100_000 {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"allocation_id": "bulk-%07d", "tenant": "acme", "tier": "pro", "node": "node-bulk", "instance_id": "gpu%d/mig%d", `+
			`"requested_at": "2026-01-05T00:00:00Z", "started_at": "2026-01-05T00:00:10Z", "ended_at": "2026-01-05T01:00:00Z"}`, i, i/7, i%7)
	}
	b.WriteString("\n]\n")
	big := b.String()
	tests := []struct {
		name    string
		maxBody int64
		status  int
		want    string
	}{
		{"default limit", 0, 200, `"bulk-0099999"`},
		{"over the limit", 1 << 20, 413, "request body: over the limit of 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &memStore{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				(&Server{Store: store, Auth: AllowAll{}, MaxBody: tt.maxBody}).postAllocations(w, r)
			}))
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/api/v1/allocations", "application/json", strings.NewReader(big))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(got), tt.want) {
				t.Errorf("%d bytes: status %d, want %d with %s: %.300s", len(big), resp.StatusCode, tt.status, tt.want, got)
			}
		})
	}
}

// TestReportFailure: a report that cannot be computed, or cannot be written (a NaN amount),
// is a 500 with a JSON body, never a 200 with an empty body, in either format. The body gives
// an error id and not the reason, which may name internal addresses; the log has the reason
// under that id.
func TestReportFailure(t *testing.T) {
	from, to := "2026-01-05T00:00:00Z", "2026-01-05T02:00:00Z"
	tests := []struct {
		name   string
		report Reporter
		want   string
	}{
		{"computation fails", func(context.Context, ReportQuery) (report.Report, error) {
			return report.Report{}, errors.New("read allocations: dial tcp 127.0.0.1:9000: connect: connection refused")
		}, "read allocations: dial tcp 127.0.0.1:9000: connect: connection refused"},
		{"second window fails", func(_ context.Context, q ReportQuery) (report.Report, error) {
			if q.From.Hour() == 1 {
				return report.Report{}, errors.New("boom")
			}
			return report.Report{WindowStart: q.From, WindowEnd: q.To}, nil
		}, "report of [2026-01-05T01:00:00Z, 2026-01-05T02:00:00Z): boom"},
		{"NaN amount", func(_ context.Context, q ReportQuery) (report.Report, error) {
			return report.Report{WindowStart: q.From, WindowEnd: q.To, Tenants: []report.Row{{Tenant: "acme", Cost: math.NaN()}}}, nil
		}, `write the report: report row \"acme\": cost is NaN`},
	}
	for _, tt := range tests {
		for _, format := range []string{"csv", "json"} {
			t.Run(tt.name+" "+format, func(t *testing.T) {
				var log bytes.Buffer
				logger := slog.New(slog.NewTextHandler(&log, nil))
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					(&Server{Store: &memStore{}, Auth: AllowAll{}, Report: tt.report, Logger: logger}).getReport(w, r)
				}))
				defer srv.Close()
				resp, err := http.Get(srv.URL + "/api/v1/report?from=" + from + "&to=" + to + "&step=1h&format=" + format)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var p problem
				if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != "application/json" ||
					json.Unmarshal(b, &p) != nil || len(p.ErrorID) != 16 || !strings.Contains(p.Error, p.ErrorID) {
					t.Errorf("status %d (%s): %q; want 500 with a JSON error and its error_id", resp.StatusCode, resp.Header.Get("Content-Type"), b)
				}
				if reason := strings.ReplaceAll(tt.want, `\"`, `"`); strings.Contains(string(b), "127.0.0.1") || strings.Contains(p.Error, reason) {
					t.Errorf("the body gives the reason %q: %s", reason, b)
				}
				if !strings.Contains(log.String(), "error_id="+p.ErrorID) || !strings.Contains(log.String(), tt.want) {
					t.Errorf("the log lacks error_id %s with the reason %s:\n%s", p.ErrorID, tt.want, log.String())
				}
			})
		}
	}
}

// TestPostConflictScoped: a refusal names only what the caller may see. An overlap with an
// allocation of a tenant a scoped scheduler does not write is "an allocation of another
// tenant", without its id, tenant or times; the operator, and a scheduler of both tenants,
// get it in full. A re-POST of another tenant's id does not say whose it is.
func TestPostConflictScoped(t *testing.T) {
	at := func(s string) time.Time { ts, _ := time.Parse(time.RFC3339, s); return ts }
	theirs := allocation.Allocation{ID: "beta-secret-7", Tenant: "beta", Tier: "pro", Node: "n", Instance: "gpu0",
		RequestedAt: at("2026-01-04T23:00:00Z"), StartedAt: at("2026-01-04T23:17:00Z")}
	store := &memStore{put: func(allocs []allocation.Allocation) (allocations.Result, error) {
		if err := allocation.FirstOverlap(allocs, []allocation.Allocation{theirs}); err != nil {
			return allocations.Result{}, fmt.Errorf("%w: %w", allocations.ErrRefused, err)
		}
		return allocations.Result{}, nil
	}}
	srv := newServer(store)
	defer srv.Close()
	post := func(caller, body string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/allocations", strings.NewReader(body))
		req.Header.Set("X-Tenant", caller)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	secrets := []string{"beta-secret-7", "beta", "23:17"}
	for _, tc := range []struct {
		caller string
		hidden bool
	}{{"", false}, {"scheduler:acme", true}, {"scheduler:acme,beta", false}, {"scheduler", false}} {
		status, got := post(tc.caller, body)
		if status != http.StatusConflict || !strings.Contains(got, `request: line 1: allocations refused: allocation \"a1\" of tenant \"acme\"`) {
			t.Errorf("%q: status %d %s, want 409 naming its own allocation a1", tc.caller, status, got)
		}
		for _, s := range secrets {
			if strings.Contains(got, s) == tc.hidden {
				t.Errorf("%q: the 409 names %q: %v, want %v: %s", tc.caller, s, !tc.hidden, !tc.hidden, got)
			}
		}
		if strings.Contains(got, "an allocation of another tenant") != tc.hidden {
			t.Errorf("%q: %s", tc.caller, got)
		}
	}

	moves := &memStore{allocs: []allocation.Allocation{theirs}}
	srv2 := newServer(moves)
	defer srv2.Close()
	req, _ := http.NewRequest("POST", srv2.URL+"/api/v1/allocations", strings.NewReader(strings.Replace(body, `"a1"`, `"beta-secret-7"`, 1)))
	req.Header.Set("X-Tenant", "scheduler:acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), `\"beta\"`) || !strings.Contains(string(b), "from tenant another tenant") {
		t.Errorf("a scoped scheduler re-POSTing another tenant's id: %d %s, want 403 not naming beta", resp.StatusCode, b)
	}
}
