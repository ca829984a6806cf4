package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/schemas/allocation"
)

// TestRoles: every role on every endpoint — who is refused (401, 403) and which tenants' rows
// the others get, in CSV and JSON.
func TestRoles(t *testing.T) {
	const window = "from=2026-01-05T00:00:00Z&to=2026-01-05T01:00:00Z"
	betaBody := strings.NewReplacer(`"a1"`, `"b1"`, `"acme"`, `"beta"`).Replace(body)
	type endpoint struct{ name, method, path, body string }
	var (
		postAcme    = endpoint{"post acme", "POST", "/api/v1/allocations", body}
		postBeta    = endpoint{"post beta", "POST", "/api/v1/allocations", betaBody}
		moveB1      = endpoint{"move b1 to acme", "POST", "/api/v1/allocations", strings.Replace(body, `"a1"`, `"b1"`, 1)}
		listAll     = endpoint{"list", "GET", "/api/v1/allocations", ""}
		listAcme    = endpoint{"list acme", "GET", "/api/v1/allocations?tenant=acme", ""}
		listBeta    = endpoint{"list beta", "GET", "/api/v1/allocations?tenant=beta", ""}
		reportCSV   = endpoint{"report csv", "GET", "/api/v1/report?" + window, ""}
		reportJSON  = endpoint{"report json", "GET", "/api/v1/report?format=json&" + window, ""}
		reportBeta  = endpoint{"report beta", "GET", "/api/v1/report?tenant=beta&" + window, ""}
		audit       = endpoint{"audit", "GET", "/api/v1/audit", ""}
		auditBeta   = endpoint{"audit beta", "GET", "/api/v1/audit?tenant=beta", ""}
		periods     = endpoint{"periods", "GET", "/api/v1/periods", ""}
		closeP      = endpoint{"close period", "POST", "/api/v1/periods/2026-02/close", ""}
		lineItems   = endpoint{"line items", "GET", "/api/v1/report?by=allocation&" + window, ""}
		lineItemsJ  = endpoint{"line items json", "GET", "/api/v1/report?by=allocation&format=json&" + window, ""}
		focusCSV    = endpoint{"focus", "GET", "/api/v1/report?format=focus&" + window, ""}
		focusBeta   = endpoint{"focus beta", "GET", "/api/v1/report?format=focus&tenant=beta&" + window, ""}
		stmtAcme    = endpoint{"statement acme", "GET", "/api/v1/statement?tenant=acme&period=2026-01", ""}
		stmtBeta    = endpoint{"statement beta", "GET", "/api/v1/statement?tenant=beta&period=2026-01", ""}
		stmtOwn     = endpoint{"own statement", "GET", "/api/v1/statement?period=2026-01", ""}
		unallocated = "__unallocated__"
	)
	tests := []struct {
		principal string // headerAuth's header
		ep        endpoint
		status    int
		tenants   []string // the tenants in the answer (reads), unallocated included
	}{
		{"", postAcme, 200, nil},
		{"", moveB1, 200, nil},
		{"", listAll, 200, []string{"acme", "beta"}},
		{"", reportCSV, 200, []string{"acme", "beta", unallocated}},
		{"", reportBeta, 200, []string{"beta"}},
		{"", audit, 200, []string{"acme", "beta"}},
		{"", auditBeta, 200, []string{"beta"}},
		{"", periods, 200, nil},
		{"", closeP, 200, nil},

		{"finance", postAcme, 403, nil},
		{"finance", listAll, 200, []string{"acme", "beta"}},
		{"finance", listBeta, 200, []string{"beta"}},
		{"finance", reportCSV, 200, []string{"acme", "beta", unallocated}},
		{"finance", reportJSON, 200, []string{"acme", "beta", unallocated}},
		{"finance", audit, 200, []string{"acme", "beta"}},
		{"finance", periods, 200, nil},
		{"finance", closeP, 200, nil},

		{"scheduler", postAcme, 200, nil},
		{"scheduler", postBeta, 200, nil},
		{"scheduler", listAll, 403, nil},
		{"scheduler", reportCSV, 403, nil},
		{"scheduler", reportBeta, 403, nil},
		{"scheduler:beta", postBeta, 200, nil},
		{"scheduler:beta", postAcme, 403, nil},
		{"scheduler", moveB1, 403, nil},
		{"scheduler:acme,beta", moveB1, 403, nil},
		{"scheduler", audit, 403, nil},
		{"scheduler", periods, 403, nil},
		{"scheduler", closeP, 403, nil},

		{"acme", postAcme, 403, nil},
		{"acme", listAll, 200, []string{"acme"}},
		{"acme", listAcme, 200, []string{"acme"}},
		{"acme", listBeta, 403, nil},
		{"acme", reportCSV, 200, []string{"acme"}},
		{"acme", reportJSON, 200, []string{"acme"}},
		{"acme", reportBeta, 403, nil},
		{"acme", lineItems, 200, []string{"acme"}},
		{"acme", lineItemsJ, 200, []string{"acme"}},
		{"acme", focusCSV, 200, []string{"acme"}},
		{"acme", focusBeta, 403, nil},
		{"finance", lineItems, 200, []string{"acme", "beta"}},
		{"finance", focusCSV, 200, []string{"acme", "beta"}},
		{"finance", focusBeta, 200, []string{"beta"}},
		{"scheduler", focusCSV, 403, nil},
		{"nobody", focusCSV, 401, nil},
		{"tenant:acme,beta", listAll, 200, []string{"acme", "beta"}},
		{"tenant:acme,beta", reportCSV, 200, []string{"acme", "beta"}},
		{"tenant:acme,beta", reportBeta, 200, []string{"beta"}},
		{"acme", audit, 403, nil},
		{"acme", auditBeta, 403, nil},
		{"acme", periods, 403, nil},
		{"acme", closeP, 403, nil},

		{"nobody", postAcme, 401, nil},
		{"nobody", listAll, 401, nil},
		{"nobody", reportCSV, 401, nil},
		{"nobody", audit, 401, nil},
		{"nobody", periods, 401, nil},
		{"nobody", closeP, 401, nil},

		{"", stmtBeta, 200, []string{"beta"}},
		{"finance", stmtAcme, 200, []string{"acme"}},
		{"finance", stmtOwn, 400, nil},
		{"acme", stmtAcme, 200, []string{"acme"}},
		{"acme", stmtOwn, 200, []string{"acme"}},
		{"acme", stmtBeta, 403, nil},
		{"tenant:acme,beta", stmtBeta, 200, []string{"beta"}},
		{"tenant:acme,beta", stmtOwn, 400, nil},
		{"scheduler", stmtAcme, 403, nil},
		{"nobody", stmtAcme, 401, nil},
		{"", endpoint{"statement of a bad period", "GET", "/api/v1/statement?tenant=acme&period=2026-13", ""}, 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.principal+" "+tt.ep.name, func(t *testing.T) {
			store := &memStore{allocs: []allocation.Allocation{{ID: "a1", Tenant: "acme"}, {ID: "b1", Tenant: "beta"}}}
			srv := newServer(store)
			defer srv.Close()
			req, _ := http.NewRequest(tt.ep.method, srv.URL+tt.ep.path, strings.NewReader(tt.ep.body))
			req.Header.Set("X-Tenant", tt.principal)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if resp.StatusCode >= 400 {
				var p problem
				if err := json.Unmarshal(b, &p); err != nil || p.Error == "" {
					t.Errorf("error body %q: want JSON {\"error\": ...}", b)
				}
				return
			}
			if tt.ep.method == "POST" {
				return
			}
			for _, tenant := range []string{"acme", "beta", unallocated} {
				want := strings.Contains(strings.Join(tt.tenants, " "), tenant)
				if got := strings.Contains(string(b), tenant); got != want {
					t.Errorf("answer has %s: %v, want %v:\n%s", tenant, got, want, b)
				}
			}
		})
	}
}

// TestNoAuthorizer: a Server without an Authorizer refuses everything, and a refused caller
// is told how to authenticate.
func TestNoAuthorizer(t *testing.T) {
	mux := http.NewServeMux()
	(&Server{Store: &memStore{}}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/api/v1/allocations", "/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T01:00:00Z"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(b), "no authentication configured") {
			t.Errorf("%s: status %d %s; want 401 naming the missing authentication", path, resp.StatusCode, b)
		}
	}
}
