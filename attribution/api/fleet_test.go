package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// TestFleetRoles: GET /api/v1/fleet is for the roles that read every tenant; the others are
// refused (403), an unknown caller 401; bad parameters are 400 naming the parameter, a window
// not attributed yet 503 with Retry-After naming its first minute missing (not the caller's
// fault, nor the service's: ask again later).
func TestFleetRoles(t *testing.T) {
	var asked FleetQuery
	notYet := time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC)
	s := &Server{Auth: headerAuth{}, Fleet: func(_ context.Context, q FleetQuery) ([]fleet.Row, error) {
		if q.From.Equal(notYet) {
			return nil, &stored.NotAttributedError{From: q.From, To: q.To, First: q.From.Add(30 * time.Minute), Last: q.To.Add(-time.Minute), Missing: 30}
		}
		asked = q
		return []fleet.Row{{Group: "A100-SXM4-40GB", WindowStart: q.From, WindowEnd: q.To, CapacityGPUHours: 1, Currency: "USD"},
			{Group: fleet.Total, WindowStart: q.From, WindowEnd: q.To, CapacityGPUHours: 1, Currency: "USD"}}, nil
	}, Ready: func() time.Time { return time.Date(2026, 1, 7, 12, 30, 40, 0, time.UTC) }}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	const window = "from=2026-01-05T00:00:00Z&to=2026-01-05T01:00:00Z"
	tests := []struct {
		principal, query string
		status           int
		want             string // in the body
	}{
		{"", window, 200, "group,window_start,window_end,capacity_gpu_hours"},
		{"", window + "&by=node&format=json", 200, `"group": "__fleet__"`},
		// A window into the future stops at the last minute attributable by now (Ready), as the
		// CLI's; one that starts after it is refused.
		{"", "from=2026-01-07T12:00:00Z&to=2026-01-08T00:00:00Z", 200, "__fleet__,2026-01-07T12:00:00Z,2026-01-07T12:30:00Z,"},
		{"", "from=2026-01-07T13:00:00Z&to=2026-01-08T00:00:00Z", 400, "the window starts after 2026-01-07T12:30:00Z"},
		{"finance", window + "&by=gpu", 200, "__fleet__,2026-01-05T00:00:00Z,2026-01-05T01:00:00Z,1.000000"},
		{"scheduler", window, 403, "operator and finance only"},
		{"acme", window, 403, "role tenant"},
		{"tenant:acme,beta", window, 403, "may not read the fleet report"},
		{"nobody", window, 401, "error"},
		{"", "from=2026-01-05T00:00:00Z", 400, "query parameter to"},
		{"", "from=2026-01-05T00:00:30Z&to=2026-01-05T01:00:00Z", 400, "whole minutes"},
		{"", window + "&by=rack", 400, "query parameter by"},
		{"", window + "&format=xml", 400, "query parameter format"},
		// Half the window not attributed yet: 503 naming the first minute missing.
		{"", "from=2026-01-06T00:00:00Z&to=2026-01-06T01:00:00Z", 503, "30 of its 60 minutes are not attributed yet, the first 2026-01-06T00:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.principal+" "+tt.query, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/api/v1/fleet?"+tt.query, nil)
			req.Header.Set("X-Tenant", tt.principal)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
				t.Fatalf("status %d %s; want %d with %q", resp.StatusCode, b, tt.status, tt.want)
			}
			if retry := resp.Header.Get("Retry-After"); (resp.StatusCode == 503) != (retry == "60") {
				t.Errorf("status %d with Retry-After %q; want 60 (the default interval) with 503 only", resp.StatusCode, retry)
			}
			if resp.StatusCode >= 400 {
				var p problem
				if err := json.Unmarshal(b, &p); err != nil || p.Error == "" {
					t.Errorf("error body %q: want JSON {\"error\": ...}", b)
				}
			}
		})
	}
	if asked.By != fleet.ByGPU {
		t.Errorf("the last answered request asked by %q, want gpu", asked.By)
	}
}
