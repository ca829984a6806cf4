package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/slicemeter/slicemeter/attribution/period"
)

// Statementer renders a tenant's statement of a billing period as one HTML page
// (attribution/statement).
type Statementer func(ctx context.Context, tenant string, m period.Month) ([]byte, error)

// statementPolicy forbids the page every fetch: it is self-contained by design, and a browser
// that shows it must not be made to reach anywhere else.
const statementPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

// getStatement answers GET /api/v1/statement?tenant=&period=YYYY-MM: the tenant's statement as
// HTML. A tenant principal reads only its own tenants' (another is 403; no tenant= is its own
// when it has one); operator and finance read any; a scheduler none.
func (s *Server) getStatement(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	tenant := q.Get("tenant")
	switch {
	case !p.readsAll() && p.Role != RoleTenant:
		s.forbid(w, p, "read statements")
		return
	case tenant == "" && !p.readsAll() && len(p.Tenants) == 1:
		tenant = p.Tenants[0]
	case tenant == "":
		s.fail(w, http.StatusBadRequest, errors.New("query parameter tenant: missing; expected the tenant whose statement to render"))
		return
	case !p.mayRead(tenant):
		s.forbid(w, p, fmt.Sprintf("read the statement of tenant %q", tenant))
		return
	}
	m, err := period.Parse(q.Get("period"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter period: %w", err))
		return
	}
	if !s.checkPeriod(w, "query parameter period", q.Get("period"), m) {
		return
	}
	if s.Statement == nil {
		s.fail(w, http.StatusNotImplemented, errors.New("this server renders no statements"))
		return
	}
	release, ok := s.admitReport(w, r, p)
	if !ok {
		return
	}
	defer release()
	page, err := s.Statement(r.Context(), tenant, m)
	if err != nil {
		// The Statementer's error names the tenant and the period already.
		if s.notYet(w, err, "") {
			return
		}
		s.logger().ErrorContext(r.Context(), "rendering a statement failed", "tenant", tenant, "period", m.String(), "err", err)
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", statementPolicy)
	if _, err := w.Write(page); err != nil {
		s.logger().DebugContext(r.Context(), "sending a statement failed", "err", err)
	}
}
