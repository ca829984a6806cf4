// Package api serves attribution's HTTP API: allocations in and out
// (POST/GET /api/v1/allocations), the tenant report (GET /api/v1/report), the allocation audit
// trail (GET /api/v1/audit) and the billing periods (GET /api/v1/periods, POST
// /api/v1/periods/{YYYY-MM}/close).
//
// Who may see what: an Authorizer (package auth: bearer tokens, JWTs) names the principal and
// its role, and every handler holds it to the role's rights (Principal.mayRead, mayWrite): a
// tenant principal only ever sees its own tenant's allocations and rows. Without an Authorizer
// every request is refused; AllowAll (--api.insecure-no-auth) makes every caller an operator.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/request"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Role is what a principal may do (docs/api.md, "API authentication").
type Role string

// The roles.
const (
	RoleOperator  Role = "operator"  // everything
	RoleFinance   Role = "finance"   // read every tenant (reports, allocations)
	RoleScheduler Role = "scheduler" // write allocations, for any tenant or for its Tenants
	RoleTenant    Role = "tenant"    // read its own Tenants only
)

// Roles are the roles in the order the documentation lists them.
func Roles() []Role { return []Role{RoleOperator, RoleFinance, RoleScheduler, RoleTenant} }

// Principal is who is calling, as the Authorizer established it.
type Principal struct {
	Name string // for logs: the token's name or the JWT's subject
	Role Role
	// Tenants: a tenant principal's own tenants (at least one); a scheduler's tenants it may
	// write (none: any tenant). Unused for operator and finance.
	Tenants []string
	// Anonymous: not authenticated (AllowAll); limits per client count its IP instead.
	Anonymous bool
}

// readsAll says whether the principal may read every tenant's data.
func (p Principal) readsAll() bool { return p.Role == RoleOperator || p.Role == RoleFinance }

// mayRead says whether the principal may read the tenant's data.
func (p Principal) mayRead(tenant string) bool {
	return p.readsAll() || p.Role == RoleTenant && slices.Contains(p.Tenants, tenant)
}

// mayWrite says whether the principal may create or change the tenant's allocations.
func (p Principal) mayWrite(tenant string) bool {
	return p.Role == RoleOperator || p.Role == RoleScheduler && (len(p.Tenants) == 0 || slices.Contains(p.Tenants, tenant))
}

// maySee says whether the principal may see that the tenant's allocations exist (its names,
// ids and times): those it may read or write.
func (p Principal) maySee(tenant string) bool { return p.mayRead(tenant) || p.mayWrite(tenant) }

// scoped is a refusal of the store as the principal may see it: an overlap with an allocation
// of a tenant it may not see names neither that allocation nor its tenant or times.
func (p Principal) scoped(err error) error {
	var (
		o *allocation.Overlap
		c *allocation.Conflict
	)
	if !errors.As(err, &o) || p.maySee(o.B.Tenant) {
		return err
	}
	index := -1
	if errors.As(err, &c) {
		index = c.Index
	}
	return fmt.Errorf("%w: %w", allocations.ErrRefused, &allocation.Conflict{Index: index, Err: o.Hidden()})
}

// mayChange refuses a change of a stored allocation's tenant unless the principal is an
// operator: a scheduler's re-POST must not move one tenant's allocation onto another's bill.
func (p Principal) mayChange(prev, next allocation.Allocation) error {
	if prev.Tenant != next.Tenant && p.Role != RoleOperator {
		return &movedError{id: next.ID, from: prev.Tenant, to: next.Tenant}
	}
	return nil
}

// movedError is mayChange's refusal.
type movedError struct{ id, from, to string }

func (e *movedError) Error() string {
	return fmt.Sprintf("allocation %q: moving it from tenant %q to %q needs the operator role", e.id, e.from, e.to)
}

// Authorizer says who a request comes from; an error refuses it (401). A Server without one
// refuses every request.
type Authorizer interface {
	Principal(r *http.Request) (Principal, error)
}

// AllowAll treats every caller as an operator: for a service started with
// --api.insecure-no-auth, and for tests.
type AllowAll struct{}

// Principal implements Authorizer.
func (AllowAll) Principal(*http.Request) (Principal, error) {
	return Principal{Name: "anonymous", Role: RoleOperator, Anonymous: true}, nil
}

// ErrNoAuthorizer refuses every request of a Server that has no Authorizer.
var ErrNoAuthorizer = errors.New("the API has no authentication configured: every request is refused")

// AllocationStore is what the API needs of the allocation store.
type AllocationStore interface {
	// PutChecked stores allocs unless check refuses a change to a stored one (allocations.Store).
	// Every write is recorded in the audit trail as by who.
	PutChecked(ctx context.Context, who audit.Actor, allocs []allocation.Allocation, check allocations.Check) (allocations.Result, error)
	List(ctx context.Context, tenant string, from, to time.Time) ([]allocation.Allocation, error)
}

// ReportQuery is one window of a report request.
type ReportQuery struct {
	From, To time.Time
	// Neighbours asks for each tenant's noisy neighbour too (the JSON report carries it).
	Neighbours bool
	// FromMinutes sums the minutes the service stored instead of computing from the samples.
	FromMinutes bool
	// Lines asks for the line items too (report.Report.Allocations).
	Lines bool
}

// Reporter computes the report of one window.
type Reporter func(ctx context.Context, q ReportQuery) (report.Report, error)

// Server is the API's handlers.
type Server struct {
	Store   AllocationStore
	Report  Reporter
	Auth    Authorizer
	Metrics *allocations.Metrics // may be nil
	// Tiers, when set, are the tiers an allocation may name (the price book's): an allocation
	// at another tier could not be priced, so it is refused at the door.
	Tiers map[string]float64
	// Zone is the time zone of step=month's calendar months (the price book's); nil: UTC.
	Zone   *time.Location
	Logger *slog.Logger
	// MaxBody bounds a POST body (default DefaultMaxBody); a larger one is refused with 413.
	MaxBody int64
	// Limits bound the reports' cost and concurrency (limits.go); nil: DefaultReportLimits
	// without a bound on concurrency.
	Limits *ReportLimits
	// Audit reads the allocation audit trail (GET /api/v1/audit); nil: that route answers 501.
	Audit AuditLog
	// Periods lists and closes billing periods (/api/v1/periods); nil: those routes answer 501.
	Periods Periods
	// Fleet computes the fleet report (GET /api/v1/fleet); nil: that route answers 501.
	Fleet Fleeter
	// Advice computes right-sizing advice (GET /api/v1/advice); nil: that route answers 501.
	Advice Adviser
	// Statement renders tenants' statements (GET /api/v1/statement); nil: that route answers 501.
	Statement Statementer
	// NotYetRetryAfter is the Retry-After of a 503 for a window whose stored minutes are not
	// all attributed yet (stored.ErrNotAttributed); zero: DefaultNotYetRetryAfter.
	NotYetRetryAfter time.Duration
	// Issuer names who bills in the FOCUS export; zero: focus.DefaultIssuer.
	Issuer focus.Issuer
	// Ready is the end of what can be attributed by now (now − the service's delay), where a
	// fleet window reaching into the future stops, as the CLI's does; nil: now −
	// attribution.DefaultDelay.
	Ready func() time.Time
}

// ready is Ready, or its default.
func (s *Server) ready() time.Time {
	if s.Ready != nil {
		return s.Ready()
	}
	return time.Now().Add(-attribution.DefaultDelay)
}

// DefaultMaxBody is the POST body limit unless Server.MaxBody says otherwise: 64 MiB holds the
// 100,000 allocations a request may carry (about 23 MiB as compact JSON) with room for
// longer names and indentation, while bounding what one request makes the server hold.
const DefaultMaxBody = 64 << 20

// Register adds the API's routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/allocations", s.postAllocations)
	mux.HandleFunc("GET /api/v1/allocations", s.getAllocations)
	mux.HandleFunc("GET /api/v1/report", s.getReport)
	mux.HandleFunc("GET /api/v1/audit", s.getAudit)
	mux.HandleFunc("GET /api/v1/periods", s.getPeriods)
	mux.HandleFunc("POST /api/v1/periods/{period}/close", s.closePeriod)
	mux.HandleFunc("GET /api/v1/fleet", s.getFleet)
	mux.HandleFunc("GET /api/v1/advice", s.getAdvice)
	mux.HandleFunc("GET /api/v1/statement", s.getStatement)
}

// problem is an error response; ErrorID, on a fault of the service, finds its reason in the
// log.
type problem struct {
	Error   string `json:"error"`
	ErrorID string `json:"error_id,omitempty"`
}

// fail answers status with err. A 4xx names what the caller can fix; a 5xx is the service's
// fault, whose reason may name internal addresses (see internalError).
func (s *Server) fail(w http.ResponseWriter, status int, err error) {
	if status >= 500 && status != http.StatusNotImplemented {
		s.internalError(w, status, err)
		return
	}
	writeJSON(w, status, problem{Error: err.Error()})
}

// DefaultNotYetRetryAfter is NotYetRetryAfter's default: the service's pass interval.
const DefaultNotYetRetryAfter = time.Minute

// notYet answers 503 with Retry-After when err says that minutes are not attributed yet
// (stored.ErrNotAttributed): not a fault, and nothing the caller can fix, so neither a 4xx
// nor a 500; the body says which minutes and what to do. It says whether it answered.
func (s *Server) notYet(w http.ResponseWriter, err error, instead string) bool {
	if !errors.Is(err, stored.ErrNotAttributed) {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(s.notYetRetry().Seconds()))))
	msg := err.Error() + "; the attribution service is attributing them: ask again later"
	if instead != "" {
		msg += ", or " + instead
	}
	writeJSON(w, http.StatusServiceUnavailable, problem{Error: msg})
	return true
}

// notYetRetry is NotYetRetryAfter or its default.
func (s *Server) notYetRetry() time.Duration {
	if s.NotYetRetryAfter <= 0 {
		return DefaultNotYetRetryAfter
	}
	return s.NotYetRetryAfter
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) principal(w http.ResponseWriter, r *http.Request) (Principal, bool) {
	if s.Auth == nil {
		s.fail(w, http.StatusUnauthorized, ErrNoAuthorizer)
		return Principal{}, false
	}
	p, err := s.Auth.Principal(r)
	var limited interface{ RetryAfter() time.Duration }
	if errors.As(err, &limited) {
		// Too many wrong tokens from the caller's address (package auth): answered cheaply.
		w.Header().Set("Retry-After", fmt.Sprint(int(limited.RetryAfter().Seconds())))
		s.fail(w, http.StatusTooManyRequests, err)
		return Principal{}, false
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="slicemeter"`)
		s.fail(w, http.StatusUnauthorized, err)
		return Principal{}, false
	}
	return p, true
}

// forbid answers 403 naming the principal, what it asked and what its role allows.
func (s *Server) forbid(w http.ResponseWriter, p Principal, what string) {
	s.fail(w, http.StatusForbidden, fmt.Errorf("%s (role %s%s) may not %s", p.Name, p.Role, tenantsText(p), what))
}

func tenantsText(p Principal) string {
	if len(p.Tenants) == 0 {
		return ""
	}
	return ", tenants " + strings.Join(p.Tenants, ",")
}

// postResponse is what POST /api/v1/allocations answers.
type postResponse struct {
	Stored    []string `json:"stored"`
	Unchanged []string `json:"unchanged"`
	// Unseen: targets no sample has mentioned yet (accepted; flagged and counted).
	Unseen []string `json:"unseen"`
}

func (s *Server) postAllocations(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	if p.Role != RoleOperator && p.Role != RoleScheduler {
		s.forbid(w, p, "write allocations")
		return
	}
	release, ok := s.admitWrite(w)
	if !ok {
		return
	}
	defer release()
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	allocs, lines, err := allocations.DecodeLines("request", body, nil)
	if err != nil {
		s.Metrics.Refused(allocations.ReasonOf(err), 1)
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	for i, a := range allocs {
		if s.Tiers != nil {
			if r := validate.CheckTier(a.Tier, s.Tiers); r != nil {
				s.Metrics.Refused(r.Reason, len(allocs))
				s.fail(w, http.StatusBadRequest, fmt.Errorf("request: allocation %d (%q): %w", i+1, a.ID, r))
				return
			}
		}
		if !p.mayWrite(a.Tenant) {
			s.Metrics.Refused(allocations.ReasonForbidden, len(allocs))
			s.forbid(w, p, fmt.Sprintf("write allocation %q of tenant %q", a.ID, a.Tenant))
			return
		}
	}
	who := audit.Actor{Door: audit.DoorHTTP, Principal: p.Name, Role: string(p.Role), Origin: r.RemoteAddr}
	res, err := s.Store.PutChecked(r.Context(), who, allocs, p.mayChange)
	var moved *movedError
	switch {
	case errors.As(err, &moved):
		s.Metrics.Refused(allocations.ReasonForbidden, len(allocs))
		from := fmt.Sprintf("%q", moved.from)
		if !p.maySee(moved.from) {
			from = "another tenant" // the id is the caller's; whose it is, it may not see
		}
		s.forbid(w, p, fmt.Sprintf("move allocation %q from tenant %s to %q (only an operator moves an allocation to another tenant)", moved.id, from, moved.to))
		return
	case errors.Is(err, allocations.ErrRefused):
		s.Metrics.Refused(allocations.ReasonConflict, len(allocs))
		s.fail(w, http.StatusConflict, allocations.AtLine("request", lines, p.scoped(err)))
		return
	case err != nil:
		s.logger().ErrorContext(r.Context(), "storing allocations failed", "count", len(allocs), "err", err)
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.Metrics.Done(res)
	if len(res.Unseen) > 0 { // one line per request, however many: a bulk POST must not flood the log
		s.logger().WarnContext(r.Context(), "allocations for instances not seen in any sample yet", "targets", len(res.Unseen), "first", res.Unseen[0])
	}
	writeJSON(w, http.StatusOK, postResponse{Stored: nonNil(res.Stored), Unchanged: nonNil(res.Unchanged), Unseen: nonNil(res.Unseen)})
}

// readBody reads a POST body up to the limit, answering 413 (naming the limit) beyond it and
// 400 when it cannot be read.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	limit := s.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.Metrics.Refused(allocations.ReasonMalformed, 1)
		s.fail(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body: over the limit of %s; expected at most that (split the allocations into several requests)", bytesText(limit)))
		return nil, false
	case err != nil:
		s.Metrics.Refused(allocations.ReasonMalformed, 1)
		s.fail(w, http.StatusBadRequest, fmt.Errorf("read the request body: %w", err))
		return nil, false
	}
	return body, true
}

// bytesText is n bytes in MiB when whole, else in bytes.
func bytesText(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// readScope is what a read request may return: every tenant (all), or only tenants.
type readScope struct {
	all     bool
	tenants []string
	who     Principal // who asked
}

// has says whether the scope includes the tenant.
func (rs readScope) has(tenant string) bool { return rs.all || slices.Contains(rs.tenants, tenant) }

// scope reads tenant, from and to; a principal that does not read every tenant is held to its
// own: another tenant is a 403, no tenant means its own.
func (s *Server) scope(w http.ResponseWriter, r *http.Request, what string, timesRequired bool) (sc readScope, from, to time.Time, ok bool) {
	p, ok := s.principal(w, r)
	if !ok {
		return readScope{}, time.Time{}, time.Time{}, false
	}
	q := r.URL.Query()
	switch tenant := q.Get("tenant"); {
	case !p.readsAll() && p.Role != RoleTenant:
		s.forbid(w, p, "read "+what)
		return readScope{}, time.Time{}, time.Time{}, false
	case tenant != "" && !p.mayRead(tenant):
		s.forbid(w, p, fmt.Sprintf("read %s of tenant %q", what, tenant))
		return readScope{}, time.Time{}, time.Time{}, false
	case tenant != "":
		sc = readScope{tenants: []string{tenant}}
	case p.readsAll():
		sc = readScope{all: true}
	default:
		sc = readScope{tenants: p.Tenants}
	}
	if from, to, ok = s.fromTo(w, r, timesRequired); !ok {
		return readScope{}, time.Time{}, time.Time{}, false
	}
	sc.who = p
	return sc, from, to, true
}

// fromTo reads the query parameters from and to (RFC 3339; zero when absent and not
// required), answering 400 when they are malformed or out of order.
func (s *Server) fromTo(w http.ResponseWriter, r *http.Request, required bool) (from, to time.Time, ok bool) {
	q := r.URL.Query()
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		v := q.Get(f.name)
		if v == "" {
			if required {
				s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter %s: missing; expected an RFC 3339 time", f.name))
				return time.Time{}, time.Time{}, false
			}
			continue
		}
		if *f.dst, ok = s.queryTime(w, f.name, v, " such as 2026-01-05T00:00:00Z"); !ok {
			return time.Time{}, time.Time{}, false
		}
	}
	if !from.IsZero() && !to.IsZero() && !to.After(from) {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameters: to %s must be after from %s", to.Format(time.RFC3339), from.Format(time.RFC3339)))
		return time.Time{}, time.Time{}, false
	}
	return from, to, true
}

func (s *Server) getAllocations(w http.ResponseWriter, r *http.Request) {
	sc, from, to, ok := s.scope(w, r, "allocations", false)
	if !ok {
		return
	}
	release, ok := s.admitReport(w, r, sc.who) // before the allocations are listed
	if !ok {
		return
	}
	defer release()
	tenant := "" // every tenant's, filtered below for a scope of several
	if len(sc.tenants) == 1 {
		tenant = sc.tenants[0]
	}
	allocs, err := s.Store.List(r.Context(), tenant, from, to)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	n := 0
	for _, a := range allocs {
		if sc.has(a.Tenant) {
			n++
		}
	}
	if limit := s.reportLimits().MaxAllocationRows; limit > 0 && n > limit {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("%d allocations match; the limit is %d (--api.max-allocation-rows): use a shorter from..to or a tenant", n, limit))
		return
	}
	out := make([]allocation.JSON, 0, n)
	for _, a := range allocs {
		if sc.has(a.Tenant) {
			out = append(out, allocation.ToJSON(a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// getReport answers the report of [from, to), optionally in steps, as CSV (default) or JSON,
// computed from the samples or (source=minutes) summed from the stored minutes, one row per
// tenant or (by=allocation) per allocation.
// A tenant principal (or ?tenant=) gets only its tenants' rows; the __unallocated__ row is for
// the principals that read every tenant, in an unfiltered report.
func (s *Server) getReport(w http.ResponseWriter, r *http.Request) {
	sc, from, to, ok := s.scope(w, r, "reports", true)
	if !ok {
		return
	}
	req, err := request.Parse(r.URL.Query(), from, to, s.Zone)
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter %w", err))
		return
	}
	if req.Format.Metadata {
		now := time.Now()
		_ = req.FocusVersion.Metadata(focus.Generator, now, focus.Sectors(from, to, s.Zone, now, nil)).Write(w)
		return
	}
	// The request's cost, counted from its parameters before anything is built or read: its
	// windows, then a slot, then its tenants (which reads the allocations).
	if !s.checkWindows(w, "query parameter step", req.Windows, "windows") {
		return
	}
	release, ok := s.admitReport(w, r, sc.who)
	if !ok {
		return
	}
	defer release()
	if !s.checkReportCost(w, r, req.Windows, sc, from, to) {
		return
	}
	if req.Format.FOCUS {
		s.getFOCUS(w, r, sc, req)
		return
	}
	windows, err := report.WindowsIn(from, to, req.Step, s.Zone)
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter step: %w", err))
		return
	}
	var series report.Series
	rows := 0
	for _, win := range windows {
		rep, err := s.Report(r.Context(), ReportQuery{From: win.Start, To: win.End, Neighbours: req.Neighbours(),
			FromMinutes: req.FromMinutes, Lines: req.Lines()})
		if err != nil {
			err = fmt.Errorf("report of [%s, %s): %w", win.Start.Format(time.RFC3339), win.End.Format(time.RFC3339), err)
			if s.notYet(w, err, "ask with source=samples to compute it now") {
				return
			}
			s.logger().ErrorContext(r.Context(), "computing a report failed", "from", win.Start, "to", win.End, "err", err)
			s.fail(w, http.StatusInternalServerError, err)
			return
		}
		if !sc.all {
			rep = rep.Only(sc.tenants...)
		}
		n := len(rep.Tenants)
		if req.Lines() {
			n = len(rep.Allocations)
		}
		if rows += n; !s.checkReportRows(w, rows) {
			return
		}
		series = append(series, rep)
	}
	// Rendered before anything is sent, so that a report that cannot be written (a NaN
	// amount) is a 500 with its reason, never a 200 with an empty or partial body.
	var body bytes.Buffer
	if err := req.Format.Write(&body, series, req.By); err != nil {
		s.logger().ErrorContext(r.Context(), "writing a report failed", "err", err)
		s.fail(w, http.StatusInternalServerError, fmt.Errorf("write the report: %w", err))
		return
	}
	w.Header().Set("Content-Type", req.ContentType())
	if _, err := body.WriteTo(w); err != nil {
		s.logger().DebugContext(r.Context(), "sending a report failed", "err", err)
	}
}
