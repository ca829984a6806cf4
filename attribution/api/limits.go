package api

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// ReportLimits bound what one report request may cost and how many are computed at once, so
// that one heavy client cannot starve the rest: a request over a cost limit gets 400 naming
// the limit and its own figure, one beyond MaxConcurrent (or MaxConcurrentPerClient of one
// client) 429 with Retry-After. Zero means no limit. Use a *ReportLimits shared by every
// request (it holds the concurrency slots).
type ReportLimits struct {
	MaxWindows    int // windows of one request (its step over its range)
	MaxCost       int // windows × tenants of one request
	MaxRows       int // tenant rows of one response, over all its windows
	MaxConcurrent int // reports computed at once
	// MaxConcurrentPerClient: reports of one client at once (its principal; with auth off its
	// IP), below MaxConcurrent so that one client cannot hold every slot.
	MaxConcurrentPerClient int
	RetryAfter             time.Duration
	MaxAuditRows           int // entries of one GET /api/v1/audit response
	MaxAllocationRows      int // allocations of one GET /api/v1/allocations response
	// MaxConcurrentWrites: POST /api/v1/allocations handled at once (each may hold a body of
	// Server.MaxBody and its decoded allocations); more: 429 with Retry-After.
	MaxConcurrentWrites int

	once       sync.Once
	slots      chan struct{}
	writeOnce  sync.Once
	writeSlots chan struct{}
	mu         sync.Mutex
	running    map[string]int // reports being computed, by client
}

// DefaultReportLimits are the flags' defaults: 10,000 windows (a year in hours), one request
// at most 100,000 tenant-windows and 1,000,000 rows, 4 reports at once and 2 of one client,
// 100,000 audit entries and 100,000 allocations, 4 allocation writes at once.
func DefaultReportLimits() *ReportLimits {
	return &ReportLimits{MaxWindows: 10000, MaxCost: 100000, MaxRows: 1000000, MaxConcurrent: 4, MaxConcurrentPerClient: 2,
		RetryAfter: 5 * time.Second, MaxAuditRows: 100000, MaxAllocationRows: 100000, MaxConcurrentWrites: 4}
}

// Check refuses negative limits (a usage error for the flags).
func (l *ReportLimits) Check() error {
	if l.MaxWindows < 0 || l.MaxCost < 0 || l.MaxRows < 0 || l.MaxConcurrent < 0 || l.MaxConcurrentPerClient < 0 || l.RetryAfter < 0 || l.MaxAuditRows < 0 || l.MaxAllocationRows < 0 || l.MaxConcurrentWrites < 0 {
		return fmt.Errorf("--api.max-report-windows, --api.max-report-cost, --api.max-report-rows, --api.max-concurrent-reports, --api.max-concurrent-reports-per-client, --api.report-retry-after, --api.max-audit-rows, --api.max-allocation-rows and --api.max-concurrent-writes must be ≥ 0")
	}
	return nil
}

// reportLimits is s.Limits, or the defaults without a bound on concurrency.
func (s *Server) reportLimits() *ReportLimits {
	if s.Limits != nil {
		return s.Limits
	}
	l := DefaultReportLimits()
	l.MaxConcurrent, l.MaxConcurrentPerClient, l.MaxConcurrentWrites = 0, 0, 0
	return l
}

// admitWrite takes one of the allocation writes' slots, or answers 429 with Retry-After naming
// the limit; release gives it back. It comes before the body is read: what a write holds is
// its body and the allocations decoded from it.
func (s *Server) admitWrite(w http.ResponseWriter) (release func(), ok bool) {
	l := s.reportLimits()
	if l.MaxConcurrentWrites <= 0 {
		return func() {}, true
	}
	l.writeOnce.Do(func() { l.writeSlots = make(chan struct{}, l.MaxConcurrentWrites) })
	select {
	case l.writeSlots <- struct{}{}:
		return func() { <-l.writeSlots }, true
	default:
		s.tooMany(w, l, fmt.Errorf("%d allocation writes are being handled, the limit (--api.max-concurrent-writes); retry later", l.MaxConcurrentWrites))
		return nil, false
	}
}

// checkWindows answers 400 when a request's windows (counted from its parameters, none
// built) exceed --api.max-report-windows; param names what sets them.
func (s *Server) checkWindows(w http.ResponseWriter, param string, windows int, what string) bool {
	l := s.reportLimits()
	if l.MaxWindows > 0 && windows > l.MaxWindows {
		advice := "use a coarser step or a shorter range"
		if what == "hours" {
			advice = "use a shorter range"
		}
		s.fail(w, http.StatusBadRequest, fmt.Errorf("%s: %d %s; the limit is %d (--api.max-report-windows): %s", param, windows, what, l.MaxWindows, advice))
		return false
	}
	return true
}

// queryTime parses the query parameter name as an RFC 3339 time and checks it against
// 2000-01-01..2106-02-07 (validate.CheckTime) at once, before anything converts it: a 400
// names the parameter, the value as given and what was expected. hint ends the format error.
func (s *Server) queryTime(w http.ResponseWriter, name, v, hint string) (time.Time, bool) {
	t, err := report.ParseTime(v) // as the CLI's --from/--to: a date is midnight UTC
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter %s: %q; expected an RFC 3339 time%s or a date such as 2026-01-05 (midnight UTC)", name, v, hint))
		return time.Time{}, false
	}
	if r := validate.CheckTime("query parameter "+name, strconv.Quote(v), t); r != nil {
		s.fail(w, http.StatusBadRequest, r)
		return time.Time{}, false
	}
	return t.UTC(), true
}

// checkPeriod refuses a billing period whose month is not inside 2000-01-01..2106-02-07, as a
// time query parameter would be; name is where it was given.
func (s *Server) checkPeriod(w http.ResponseWriter, name, v string, m period.Month) bool {
	if err := m.CheckRange(name, strconv.Quote(v)); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return false
	}
	return true
}

// admitReport takes a slot of the client's and then one of the server's, or answers 429 with
// Retry-After naming the limit; release gives them back.
func (s *Server) admitReport(w http.ResponseWriter, r *http.Request, p Principal) (release func(), ok bool) {
	l := s.reportLimits()
	client := clientOf(r, p)
	if !l.takeClient(client) {
		s.tooMany(w, l, fmt.Errorf("%s has %d reports being computed, the limit (--api.max-concurrent-reports-per-client); retry later", client, l.MaxConcurrentPerClient))
		return nil, false
	}
	if l.MaxConcurrent <= 0 {
		return func() { l.releaseClient(client) }, true
	}
	l.once.Do(func() { l.slots = make(chan struct{}, l.MaxConcurrent) })
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots; l.releaseClient(client) }, true
	default:
		l.releaseClient(client)
		s.tooMany(w, l, fmt.Errorf("%d reports are being computed, the limit (--api.max-concurrent-reports); retry later", l.MaxConcurrent))
		return nil, false
	}
}

func (s *Server) tooMany(w http.ResponseWriter, l *ReportLimits, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((l.RetryAfter+time.Second-1)/time.Second))))
	s.fail(w, http.StatusTooManyRequests, err)
}

// clientOf names whom the per-client limit counts: the principal, or for an anonymous one
// (auth off: every caller is the same operator) the remote IP. Behind a proxy that IP is the
// proxy's.
func clientOf(r *http.Request, p Principal) string {
	if !p.Anonymous {
		return fmt.Sprintf("principal %q", p.Name)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "client " + host
}

// takeClient counts one more report of client unless it has MaxConcurrentPerClient already.
func (l *ReportLimits) takeClient(client string) bool {
	if l.MaxConcurrentPerClient <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[client] >= l.MaxConcurrentPerClient {
		return false
	}
	if l.running == nil {
		l.running = map[string]int{}
	}
	l.running[client]++
	return true
}

func (l *ReportLimits) releaseClient(client string) {
	if l.MaxConcurrentPerClient <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[client]--; l.running[client] <= 0 {
		delete(l.running, client) // the map holds only clients with reports running
	}
}

// checkReportCost answers 400 if windows × tenants of the request exceeds the limits. The
// tenants are those of a scoped request, or in an unfiltered one those with an allocation in
// [from, to) plus the __unallocated__ row: that reads the allocations, so the caller checks
// the windows (checkWindows) and takes a slot (admitReport) first.
func (s *Server) checkReportCost(w http.ResponseWriter, r *http.Request, windows int, sc readScope, from, to time.Time) bool {
	l := s.reportLimits()
	if !s.checkWindows(w, "query parameter step", windows, "windows") {
		return false
	}
	if l.MaxCost <= 0 {
		return true
	}
	tenants := max(1, len(sc.tenants))
	if sc.all {
		allocs, err := s.Store.List(r.Context(), "", from, to)
		if err != nil {
			s.fail(w, http.StatusInternalServerError, fmt.Errorf("count the report's tenants: %w", err))
			return false
		}
		seen := map[string]bool{}
		for _, a := range allocs {
			seen[a.Tenant] = true
		}
		tenants = len(seen) + 1
	}
	if cost := windows * tenants; cost > l.MaxCost {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("report of %d windows × %d tenants = %d; the limit is %d (--api.max-report-cost): use a coarser step, a shorter range or one tenant", windows, tenants, cost, l.MaxCost))
		return false
	}
	return true
}

// checkReportRows answers 400 once the rows computed so far exceed the limit.
func (s *Server) checkReportRows(w http.ResponseWriter, rows int) bool {
	l := s.reportLimits()
	if l.MaxRows > 0 && rows > l.MaxRows {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("report of more than %d rows (%d so far); the limit is %d (--api.max-report-rows): use a coarser step, a shorter range or one tenant", l.MaxRows, rows, l.MaxRows))
		return false
	}
	return true
}
