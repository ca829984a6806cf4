package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// TestNotAttributedYetIs503: a window whose stored minutes are not all attributed yet is
// nothing the caller can fix and no fault of the service: the statement, a report from the
// stored minutes and the fleet report answer 503 with Retry-After (the service's interval)
// and a body that says which minutes and what to do, never 500 "internal error"; the
// statement's error names its tenant and period once (it was doubled).
func TestNotAttributedYetIs503(t *testing.T) {
	notYet := fmt.Errorf("report [2026-12-01T00:00:00Z, 2026-12-02T00:00:00Z) from stored minutes: 1440 of its 1440 minutes are %w", stored.ErrNotAttributed)
	s := &Server{Auth: headerAuth{}, NotYetRetryAfter: 30 * time.Second,
		Report: func(_ context.Context, q ReportQuery) (report.Report, error) {
			if q.FromMinutes {
				return report.Report{}, notYet
			}
			return report.Report{WindowStart: q.From, WindowEnd: q.To, Currency: "USD"}, nil
		},
		Statement: func(_ context.Context, tenant string, m period.Month) ([]byte, error) {
			return nil, fmt.Errorf("statement of %s for %s: report of the period: %w", tenant, m, notYet)
		},
	}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		path, want string
		status     int
		retry      string
	}{
		{"/api/v1/statement?period=2026-12", "statement of acme for 2026-12: report of the period: report [2026-12-01T00:00:00Z", 503, "30"},
		{"/api/v1/report?from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z&source=minutes", "ask with source=samples", 503, "30"},
		{"/api/v1/report?from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z", "tenant,tier", 200, ""},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) || resp.Header.Get("Retry-After") != tc.retry {
			t.Errorf("%s: %d (Retry-After %q) %s; want %d (Retry-After %q) with %q", tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), body,
				tc.status, tc.retry, tc.want)
		}
		if strings.Count(body, "statement of acme for 2026-12") > 1 || strings.Contains(body, "internal error") {
			t.Errorf("%s: %s: the prefix is doubled or the reason hidden", tc.path, body)
		}
		if tc.status == 503 && !strings.Contains(body, "1440 of its 1440 minutes are not attributed yet; the attribution service is attributing them: ask again later") {
			t.Errorf("%s: %s: want the minutes and what to do", tc.path, body)
		}
	}
}
