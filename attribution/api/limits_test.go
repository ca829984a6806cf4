package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/allocation"
)

// twoRows is a Reporter whose every window has two tenant rows.
func twoRows(_ context.Context, q ReportQuery) (report.Report, error) {
	return report.Report{WindowStart: q.From, WindowEnd: q.To, Currency: "USD", Tenants: []report.Row{
		{Tenant: "acme", Tier: "pro", WindowStart: q.From, WindowEnd: q.To, Currency: "USD"},
		{Tenant: "beta", Tier: "pro", WindowStart: q.From, WindowEnd: q.To, Currency: "USD"},
	}}, nil
}

func getStatus(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// Ten hourly windows; three tenants have allocations, plus the __unallocated__ row: cost 40.
func TestReportCostLimits(t *testing.T) {
	store := &memStore{allocs: []allocation.Allocation{{ID: "a", Tenant: "acme"}, {ID: "b", Tenant: "beta"}, {ID: "c", Tenant: "gamma"}, {ID: "d", Tenant: "acme"}}}
	const query = "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T10:00:00Z&step=1h"
	tests := []struct {
		name   string
		limits *ReportLimits
		query  string
		code   int
		want   []string
	}{
		{"within", &ReportLimits{MaxWindows: 10, MaxCost: 40, MaxRows: 20}, query, 200, nil},
		{"windows", &ReportLimits{MaxWindows: 5}, query, 400, []string{"10 windows", "limit is 5", "--api.max-report-windows"}},
		{"cost", &ReportLimits{MaxCost: 39}, query, 400, []string{"10 windows × 4 tenants = 40", "limit is 39", "--api.max-report-cost"}},
		{"cost of one tenant", &ReportLimits{MaxCost: 10}, query + "&tenant=acme", 200, nil},
		{"rows", &ReportLimits{MaxRows: 15}, query, 400, []string{"more than 15 rows (16 so far)", "--api.max-report-rows"}},
		{"no limits", &ReportLimits{}, query, 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				(&Server{Store: store, Report: twoRows, Auth: AllowAll{}, Limits: tt.limits}).getReport(w, r)
			}))
			defer srv.Close()
			code, _, body := getStatus(t, srv.URL+tt.query)
			if code != tt.code {
				t.Fatalf("status %d, want %d: %s", code, tt.code, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body does not name %q: %s", w, body)
				}
			}
		})
	}
}

// With one report at a time, a second request while the first is computed gets 429 with
// Retry-After, and the slot is free again once the first has answered.
func TestReportConcurrencyLimit(t *testing.T) {
	started, finish := make(chan struct{}, 1), make(chan struct{})
	reporter := func(ctx context.Context, q ReportQuery) (report.Report, error) {
		if q.From.Hour() == 0 {
			select {
			case started <- struct{}{}:
				<-finish
			default:
			}
		}
		return twoRows(ctx, q)
	}
	s := &Server{Store: &memStore{}, Report: reporter, Auth: AllowAll{}, Limits: &ReportLimits{MaxConcurrent: 1, RetryAfter: 1500 * time.Millisecond}}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	url := srv.URL + "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T02:00:00Z&step=1h"

	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	select {
	case <-started:
	case code := <-first:
		t.Fatalf("the first report answered %d before computing", code)
	}
	code, header, body := getStatus(t, url)
	if code != http.StatusTooManyRequests || header.Get("Retry-After") != "2" || !strings.Contains(body, "--api.max-concurrent-reports") {
		t.Errorf("second report while one runs: %d Retry-After %q %s; want 429, Retry-After 2, naming the limit", code, header.Get("Retry-After"), body)
	}
	close(finish)
	if code := <-first; code != http.StatusOK {
		t.Errorf("first report: %d", code)
	}
	if code, _, body := getStatus(t, url); code != http.StatusOK {
		t.Errorf("a report after the first ended: %d %s", code, body)
	}
}

func TestReportLimitsCheck(t *testing.T) {
	if err := DefaultReportLimits().Check(); err != nil {
		t.Error(err)
	}
	if err := (&ReportLimits{MaxCost: -1}).Check(); err == nil || !strings.Contains(err.Error(), "--api.max-report-cost") {
		t.Errorf("negative cost limit: %v", err)
	}
}

// One client may hold at most MaxConcurrentPerClient reports: its next one gets 429 naming
// that limit, while another client (another principal, or with auth off another IP) is
// still served. The held report starts at 00:00 and blocks until released.
func TestReportConcurrencyPerClient(t *testing.T) {
	tests := []struct {
		name               string
		auth               Authorizer
		holder, second     string // X-Tenant headers (headerAuth)
		holderIP, secondIP string // remote IPs
		code               int
	}{
		{"same principal", headerAuth{}, "finance", "finance", "10.0.0.1", "10.0.0.2", http.StatusTooManyRequests},
		{"another principal, same IP", headerAuth{}, "finance", "", "10.0.0.1", "10.0.0.1", http.StatusOK},
		{"auth off, same IP", AllowAll{}, "", "", "10.0.0.1", "10.0.0.1", http.StatusTooManyRequests},
		{"auth off, another IP", AllowAll{}, "", "", "10.0.0.1", "10.0.0.2", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started, finish := make(chan struct{}, 1), make(chan struct{})
			reporter := func(ctx context.Context, q ReportQuery) (report.Report, error) {
				if q.From.Hour() == 0 {
					started <- struct{}{}
					<-finish
				}
				return twoRows(ctx, q)
			}
			s := &Server{Store: &memStore{}, Report: reporter, Auth: tt.auth,
				Limits: &ReportLimits{MaxConcurrent: 4, MaxConcurrentPerClient: 1, RetryAfter: time.Second}}
			mux := http.NewServeMux()
			s.Register(mux)
			request := func(header, ip, from string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodGet, "/api/v1/report?from=2026-01-05T"+from+":00:00Z&to=2026-01-05T"+from+":30:00Z", nil)
				r.Header.Set("X-Tenant", header)
				r.RemoteAddr = ip + ":4711"
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, r)
				return w
			}
			held := make(chan *httptest.ResponseRecorder, 1)
			go func() { held <- request(tt.holder, tt.holderIP, "00") }()
			<-started
			w := request(tt.second, tt.secondIP, "05")
			close(finish)
			if w.Code != tt.code {
				t.Errorf("second report while the first is held: %d, want %d: %s", w.Code, tt.code, w.Body)
			}
			if tt.code == http.StatusTooManyRequests && (w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "--api.max-concurrent-reports-per-client")) {
				t.Errorf("429 without Retry-After 1 or naming the limit: %q %s", w.Header().Get("Retry-After"), w.Body)
			}
			if h := <-held; h.Code != http.StatusOK {
				t.Errorf("held report: %d %s", h.Code, h.Body)
			}
			// Its slot is given back: the same client is served again.
			if w := request(tt.second, tt.secondIP, "05"); w.Code != http.StatusOK {
				t.Errorf("after the first ended: %d %s", w.Code, w.Body)
			}
		})
	}
}

// GET /api/v1/allocations answers at most MaxAllocationRows allocations of the request's
// scope; more is a 400 naming the limit, its flag and the figure.
func TestAllocationRowsLimit(t *testing.T) {
	store := &memStore{allocs: []allocation.Allocation{{ID: "a", Tenant: "acme"}, {ID: "b", Tenant: "beta"}, {ID: "c", Tenant: "gamma"}, {ID: "d", Tenant: "acme"}}}
	tests := []struct {
		name   string
		limit  int
		caller string // X-Tenant (headerAuth)
		query  string
		code   int
		want   []string
	}{
		{"within", 4, "", "", 200, nil},
		{"over", 3, "", "", 400, []string{"4 allocations", "the limit is 3", "--api.max-allocation-rows"}},
		{"one tenant within", 2, "", "?tenant=acme", 200, nil},
		{"one tenant over", 1, "", "?tenant=acme", 400, []string{"2 allocations", "the limit is 1"}},
		{"a tenant principal counts only its own", 2, "acme", "", 200, nil},
		{"no limit", 0, "", "", 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{Store: store, Auth: headerAuth{}, Limits: &ReportLimits{MaxAllocationRows: tt.limit}}
			r := httptest.NewRequest(http.MethodGet, "/api/v1/allocations"+tt.query, nil)
			r.Header.Set("X-Tenant", tt.caller)
			w := httptest.NewRecorder()
			s.getAllocations(w, r)
			if w.Code != tt.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.code, w.Body)
			}
			for _, want := range tt.want {
				if !strings.Contains(w.Body.String(), want) {
					t.Errorf("body does not name %q: %s", want, w.Body)
				}
			}
		})
	}
}
