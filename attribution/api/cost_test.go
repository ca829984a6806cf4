package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit"
)

// work counts every read a Server makes of what is behind it: the store, the reports, the
// audit trail, the periods, the fleet and the statements.
type work struct{ reads atomic.Int64 }

func (k *work) List(context.Context, string, time.Time, time.Time) ([]allocation.Allocation, error) {
	k.reads.Add(1)
	return []allocation.Allocation{{ID: "a", Tenant: "acme"}}, nil
}

func (k *work) PutChecked(context.Context, audit.Actor, []allocation.Allocation, allocations.Check) (allocations.Result, error) {
	k.reads.Add(1)
	return allocations.Result{}, nil
}

type workPeriods struct{ *work }

func (p workPeriods) List(context.Context) ([]period.Closed, error) { p.reads.Add(1); return nil, nil }
func (p workPeriods) Close(context.Context, period.Month, time.Time) (period.Closed, error) {
	p.reads.Add(1)
	return period.Closed{}, nil
}

// countingServer is a Server with the default limits whose every dependency counts its calls
// and answers at once with nothing.
func countingServer(k *work) *Server {
	return &Server{
		Store: k,
		Auth:  headerAuth{},
		Report: func(_ context.Context, q ReportQuery) (report.Report, error) {
			k.reads.Add(1)
			return report.Report{WindowStart: q.From, WindowEnd: q.To, Currency: "USD"}, nil
		},
		Audit:   func(context.Context, audit.Query) ([]audit.Entry, error) { k.reads.Add(1); return nil, nil },
		Periods: workPeriods{k},
		Fleet:   func(context.Context, FleetQuery) ([]fleet.Row, error) { k.reads.Add(1); return nil, nil },
		// The end of time that a query parameter may name, so a hostile window is counted whole.
		Ready: func() time.Time { return time.Date(2106, 2, 7, 6, 28, 0, 0, time.UTC) },
		Statement: func(context.Context, string, period.Month) ([]byte, error) {
			k.reads.Add(1)
			return []byte("<html>"), nil
		},
		Limits: DefaultReportLimits(),
	}
}

// TestHostileQueries: the requests that held gigabytes on the old code, and the widest window
// each role may ask, answer 400 at once naming the parameter and the range or the limit, with
// nothing read or built first.
func TestHostileQueries(t *testing.T) {
	const (
		y0001   = "from=0001-01-01T00:00:00Z&to=9999-12-31T00:00:00Z"
		widest  = "from=2000-01-01T00:00:00Z&to=2106-02-07T00:00:00Z"
		rangeIs = "2000-01-01T00:00:00Z to 2106-02-07T06:28:15Z"
	)
	tests := []struct {
		who, method, path string
		want              []string
	}{
		{"acme", "GET", "/api/v1/report?" + widest + "&step=1m", []string{"55804320 windows", "--api.max-report-windows"}},
		{"acme", "GET", "/api/v1/report?" + widest + "&step=1s", []string{"3348259200 windows"}},
		{"acme", "GET", "/api/v1/report?" + widest + "&step=1m&format=json&by=allocation&source=minutes", []string{"55804320 windows"}},
		{"acme", "GET", "/api/v1/report?" + widest + "&format=focus", []string{"930072 windows"}},
		{"acme", "GET", "/api/v1/report?" + widest + "&format=focus&encoding=parquet", []string{"930072 windows"}},
		{"acme", "GET", "/api/v1/report?" + y0001 + "&format=focus", []string{"query parameter from", "0001-01-01T00:00:00Z", rangeIs}},
		{"acme", "GET", "/api/v1/report?" + y0001 + "&step=1m", []string{"query parameter from", rangeIs}},
		{"acme", "GET", "/api/v1/report?from=2026-01-01T00:00:00Z&to=2610-08-01T00:00:00Z", []string{"query parameter to", "2610-08-01T00:00:00Z", rangeIs}},
		{"finance", "GET", "/api/v1/report?" + widest + "&step=1h", []string{"930072 windows"}},
		{"operator", "GET", "/api/v1/report?" + widest + "&step=1h&by=allocation&format=csv", []string{"930072 windows"}},
		{"operator", "GET", "/api/v1/report?" + widest + "&step=1d", []string{"38753 windows"}},
		{"finance", "GET", "/api/v1/fleet?" + y0001, []string{"query parameter from", rangeIs}},
		{"finance", "GET", "/api/v1/fleet?from=1900-01-01T00:00:00Z&to=2200-01-01T00:00:00Z", []string{"query parameter from", rangeIs}},
		{"operator", "GET", "/api/v1/fleet?" + widest, []string{"930072 hours", "--api.max-report-windows"}},
		{"finance", "GET", "/api/v1/fleet?from=2000-01-01T00:00:00Z&to=2106-02-07T06:28:00Z&by=gpu&format=json", []string{"930079 hours"}},
		{"acme", "GET", "/api/v1/allocations?" + y0001, []string{"query parameter from", rangeIs}},
		{"finance", "GET", "/api/v1/allocations?from=2026-01-01T00:00:00Z&to=9999-12-31T00:00:00Z", []string{"query parameter to", rangeIs}},
		{"operator", "GET", "/api/v1/audit?" + y0001, []string{"query parameter from", rangeIs}},
		{"finance", "GET", "/api/v1/audit?from=1970-01-01T00:00:00Z", []string{"query parameter from", rangeIs}},
		{"acme", "GET", "/api/v1/statement?period=9999-12", []string{"query parameter period", "9999-12", rangeIs}},
		{"finance", "GET", "/api/v1/statement?tenant=acme&period=0001-01", []string{"query parameter period", rangeIs}},
		{"finance", "GET", "/api/v1/statement?tenant=acme&period=2106-02", []string{"query parameter period", rangeIs}},
		{"operator", "POST", "/api/v1/periods/9999-12/close", []string{"path period", rangeIs}},
		{"operator", "POST", "/api/v1/periods/1999-12/close", []string{"path period", rangeIs}},
	}
	for _, tt := range tests {
		t.Run(tt.who+" "+tt.path, func(t *testing.T) {
			k := &work{}
			mux := http.NewServeMux()
			countingServer(k).Register(mux)
			r := httptest.NewRequest(tt.method, tt.path, nil)
			r.Header.Set("X-Tenant", tt.who)
			w := httptest.NewRecorder()
			start := time.Now()
			mux.ServeHTTP(w, r)
			if d := time.Since(start); d > time.Second {
				t.Errorf("answered after %s", d)
			}
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", w.Code, w.Body)
			}
			for _, s := range tt.want {
				if !strings.Contains(w.Body.String(), s) {
					t.Errorf("body does not name %q: %s", s, w.Body)
				}
			}
			if n := k.reads.Load(); n != 0 {
				t.Errorf("%d reads before the 400", n)
			}
		})
	}
}

// TestLimiterBeforeListing: while the only report slot is taken, an operator's report and
// allocation list, and finance's audit and period list, get 429 without reading anything.
func TestLimiterBeforeListing(t *testing.T) {
	k := &work{}
	s := countingServer(k)
	s.Limits = &ReportLimits{MaxConcurrent: 1, MaxCost: 100000, RetryAfter: time.Second}
	release, ok := s.admitReport(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), Principal{Name: "other"})
	if !ok {
		t.Fatal("no slot")
	}
	defer release()
	mux := http.NewServeMux()
	s.Register(mux)
	for _, path := range []string{"/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T10:00:00Z&step=1h",
		"/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T10:00:00Z&format=focus",
		"/api/v1/allocations", "/api/v1/audit", "/api/v1/periods", "/api/v1/fleet?from=2026-01-05T00:00:00Z&to=2026-01-05T10:00:00Z",
		"/api/v1/statement?tenant=acme&period=2026-01"} {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("X-Tenant", "finance")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
			t.Errorf("%s: status %d Retry-After %q, want 429 and 1: %s", path, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	}
	if n := k.reads.Load(); n != 0 {
		t.Errorf("%d reads while every slot was taken", n)
	}
}

// TestWriteConcurrencyLimit: beyond --api.max-concurrent-writes a POST of allocations is a
// 429 with Retry-After naming the limit; the slot is free again
// once the first has answered.
func TestWriteConcurrencyLimit(t *testing.T) {
	entered, finish := make(chan struct{}), make(chan struct{})
	store := &memStore{put: func([]allocation.Allocation) (allocations.Result, error) {
		entered <- struct{}{}
		<-finish
		return allocations.Result{Stored: []string{"a1"}}, nil
	}}
	s := &Server{Store: store, Auth: headerAuth{}, Limits: &ReportLimits{MaxConcurrentWrites: 1, RetryAfter: 2 * time.Second}}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func() (*http.Response, error) {
		return http.Post(srv.URL+"/api/v1/allocations", "application/json", strings.NewReader(body))
	}
	first := make(chan int)
	go func() {
		resp, err := post()
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-entered
	resp, err := post()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("second write: %d Retry-After %q, want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(finish)
	if code := <-first; code != http.StatusOK {
		t.Errorf("first write: %d", code)
	}
	go func() { <-entered }()
	resp, err = post()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a write after the first answered: %d", resp.StatusCode)
	}
}

// FuzzQuery drives every endpoint with random query strings (and path periods) as each role:
// each answers without panicking, quickly, and never 500 (the dependencies never fail).
func FuzzQuery(f *testing.F) {
	for _, seed := range []string{
		"from=2000-01-01T00:00:00Z&to=2106-02-07T00:00:00Z&step=1m",
		"from=0001-01-01T00:00:00Z&to=9999-12-31T00:00:00Z&format=focus",
		"from=2026-01-05T00:00:00Z&to=2026-01-05T10:00:00Z&step=1h&format=json&by=allocation",
		"from=2026-01-05T00:00:00Z&to=2026-03-05T00:00:00Z&step=month&source=minutes",
		"from=2026-01-05T00:00:30Z&to=2026-01-05T00:10:00Z&step=9223372036854775807d",
		"from=2026-01-05T00:00:00Z&to=2026-01-05T00:00:00.000000001Z&step=1s",
		"period=2026-01&tenant=acme", "period=9999-12", "allocation_id=x&tenant=acme",
		"from=2106-02-07T06:28:15.999999999Z&to=2106-02-07T06:28:15.999999999Z",
	} {
		f.Add(seed, uint8(0))
	}
	paths := []string{"GET /api/v1/report", "GET /api/v1/allocations", "GET /api/v1/audit", "GET /api/v1/fleet",
		"GET /api/v1/statement", "GET /api/v1/periods", "POST /api/v1/periods/%s/close"}
	roles := []string{"operator", "finance", "acme", "scheduler"}
	f.Fuzz(func(t *testing.T, query string, pick uint8) {
		k := &work{}
		mux := http.NewServeMux()
		countingServer(k).Register(mux)
		method, path, _ := strings.Cut(paths[int(pick)%len(paths)], " ")
		if strings.Contains(path, "%s") {
			v, _ := url.ParseQuery(query)
			path = strings.Replace(path, "%s", url.PathEscape(v.Get("period")), 1)
		}
		r := httptest.NewRequest(method, "http://x"+path, nil)
		r.URL.RawQuery = query
		r.Header.Set("X-Tenant", roles[int(pick/16)%len(roles)])
		w := httptest.NewRecorder()
		start := time.Now()
		mux.ServeHTTP(w, r)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s %s?%s took %s", method, path, query, d)
		}
		if w.Code >= 500 {
			t.Errorf("%s %s?%s: %d %s", method, path, query, w.Code, w.Body)
		}
	})
}
