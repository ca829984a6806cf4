package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/request"
)

// Adviser computes right-sizing advice (advice.Compute with the service's connection and
// price book).
type Adviser func(ctx context.Context, o advice.Options) (advice.Result, error)

// getAdvice answers right-sizing advice (README.md, "Right-sizing"): the parameters of
// `slicemeter advise` (from, to, by, format, compute_headroom, memory_headroom, min_measured;
// request.ParseAdvice) and tenant. A tenant principal sees only its own tenants' allocations
// (tenant, if given, must be one of them); operator and finance see all, or the tenant named.
// The window's hours are counted against the report limits before anything is read.
func (s *Server) getAdvice(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	if !p.readsAll() && p.Role != RoleTenant {
		s.forbid(w, p, "read right-sizing advice (operator, finance and tenants only)")
		return
	}
	if s.Advice == nil {
		s.fail(w, http.StatusNotImplemented, fmt.Errorf("this server does not serve right-sizing advice"))
		return
	}
	q := r.URL.Query()
	req, err := request.ParseAdvice(q, time.Now())
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter %w", err))
		return
	}
	switch tenant := q.Get("tenant"); {
	case tenant != "" && !p.mayRead(tenant):
		s.forbid(w, p, "read the advice of tenant "+tenant)
		return
	case tenant != "":
		req.Options.Tenants = []string{tenant}
	case !p.readsAll():
		req.Options.Tenants = slices.Clone(p.Tenants)
	}
	hours := int(req.Options.To.Sub(req.Options.From).Hours()) + 1
	if !s.checkWindows(w, "query parameters from and to", hours, "hours") {
		return
	}
	release, ok := s.admitReport(w, r, p)
	if !ok {
		return
	}
	defer release()
	res, err := s.Advice(r.Context(), req.Options)
	if err != nil {
		s.logger().ErrorContext(r.Context(), "computing the advice failed", "from", req.Options.From, "to", req.Options.To, "err", err)
		s.fail(w, http.StatusInternalServerError, fmt.Errorf("advice of [%s, %s): %w", req.Options.From.Format(time.RFC3339), req.Options.To.Format(time.RFC3339), err))
		return
	}
	var body bytes.Buffer
	if err := res.Write(&body, req.By, req.Format); err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	if req.Format == advice.CSV {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	if _, err := body.WriteTo(w); err != nil {
		s.logger().DebugContext(r.Context(), "sending the advice failed", "err", err)
	}
}
