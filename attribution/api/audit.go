package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/slicemeter/slicemeter/schemas/audit"
)

// AuditLog reads the allocation audit trail (schemas/audit.List over the database).
type AuditLog func(ctx context.Context, q audit.Query) ([]audit.Entry, error)

// getAudit lists the allocation audit trail's entries in [from, to), of one allocation_id
// and of one tenant (before or after the write) when given, oldest first: for the principals
// that read every tenant (operator, finance). More entries than --api.max-audit-rows is a 400
// naming the limit, as a report of too many rows is.
func (s *Server) getAudit(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	if !p.readsAll() {
		s.forbid(w, p, "read the allocation audit trail (operator and finance only)")
		return
	}
	from, to, ok := s.fromTo(w, r, false)
	if !ok {
		return
	}
	if s.Audit == nil {
		s.fail(w, http.StatusNotImplemented, fmt.Errorf("this server keeps no audit trail"))
		return
	}
	release, ok := s.admitReport(w, r, p) // before the audit trail is read
	if !ok {
		return
	}
	defer release()
	q := r.URL.Query()
	limit := s.reportLimits().MaxAuditRows
	query := audit.Query{From: from, To: to, AllocationID: q.Get("allocation_id"), Tenant: q.Get("tenant")}
	if limit > 0 {
		query.Limit = limit + 1 // one more, to tell "exactly the limit" from "over it"
	}
	entries, err := s.Audit(r.Context(), query)
	if err != nil {
		s.logger().ErrorContext(r.Context(), "reading the audit trail failed", "err", err)
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	if limit > 0 && len(entries) > limit {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("more than %d audit entries match; the limit is %d (--api.max-audit-rows): use a shorter from..to, an allocation_id or a tenant", limit, limit))
		return
	}
	out := make([]audit.JSON, len(entries))
	for i, e := range entries {
		out[i] = audit.ToJSON(e)
	}
	writeJSON(w, http.StatusOK, out)
}
