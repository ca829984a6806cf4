package api

import (
	"context"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/advice"
)

// TestAdviceRoles: GET /api/v1/advice gives operator and finance every tenant's allocations
// (or the tenant named), a tenant its own only (another tenant named: 403), the other roles
// 403; bad parameters are 400 naming the parameter, and a window over the report limits is
// refused before the adviser runs.
func TestAdviceRoles(t *testing.T) {
	calls := 0
	s := &Server{Auth: headerAuth{}, Limits: &ReportLimits{MaxWindows: 200}, Advice: func(_ context.Context, o advice.Options) (advice.Result, error) {
		calls++
		res := advice.Result{From: o.From, To: o.To, Currency: "USD"}
		for _, tenant := range []string{"acme", "beta"} {
			if o.Tenants != nil && !slices.Contains(o.Tenants, tenant) {
				continue
			}
			res.Rows = append(res.Rows, advice.Row{AllocationID: tenant + "-0", Tenant: tenant, Node: "n", InstanceID: "gpu0", Kind: "gpu",
				Shape: "gpu", AdvisedShape: "1g.5gb", Action: advice.Downsize, Fraction: big.NewRat(1, 1), AdvisedFraction: big.NewRat(1, 7),
				Savings: decimal.RequireFromString("0.928"), Savings30d: decimal.RequireFromString("668.16"), Currency: "USD"})
		}
		return res, nil
	}}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	const window = "from=2026-01-05T00:00:00Z&to=2026-01-05T01:00:00Z"
	tests := []struct {
		principal, query string
		status           int
		want, not        string
	}{
		{"", window, 200, "beta-0,beta,n,gpu0,gpu,gpu,1g.5gb,downsize", ""},
		{"finance", window + "&tenant=acme&format=json", 200, `"savings": 0.928000`, "beta"},
		{"acme", window, 200, "acme-0,acme", "beta"},
		{"tenant:acme,beta", window + "&by=tenant", 200, "beta,2026-01-05T00:00:00Z", ""},
		{"acme", window + "&tenant=beta", 403, "tenant beta", ""},
		{"scheduler", window, 403, "operator, finance and tenants only", ""},
		{"nobody", window, 401, "error", ""},
		{"", window + "&by=rack", 400, "query parameter by", ""},
		{"", window + "&compute_headroom=-1", 400, "query parameter compute_headroom", ""},
		{"", window + "&min_measured=soon", 400, "query parameter min_measured", ""},
		{"", "from=2026-01-05T01:00:00Z&to=2026-01-05T00:00:00Z", 400, "query parameter to", ""},
		// 7 days are 169 hours with the partial one, within the 200 allowed; 10 days are not.
		{"", "to=2026-01-08T00:00:00Z", 200, "allocation_id", ""},
		{"", "from=2026-01-01T00:00:00Z&to=2026-01-11T00:00:00Z", 400, "241 hours; the limit is 200", ""},
	}
	for _, tt := range tests {
		t.Run(tt.principal+" "+tt.query, func(t *testing.T) {
			before := calls
			req, _ := http.NewRequest("GET", srv.URL+"/api/v1/advice?"+tt.query, nil)
			req.Header.Set("X-Tenant", tt.principal)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) || tt.not != "" && strings.Contains(string(b), tt.not) {
				t.Fatalf("status %d %s; want %d with %q without %q", resp.StatusCode, b, tt.status, tt.want, tt.not)
			}
			if resp.StatusCode >= 400 && calls != before {
				t.Errorf("refused with %d after the adviser ran", resp.StatusCode)
			}
		})
	}
}
