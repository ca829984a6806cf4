package api

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// ReportLimits bound what one report request may cost and how many are computed at once, so
// that one heavy client cannot starve the rest: a request over a cost limit gets 400 naming
// the limit and its own figure, one beyond MaxConcurrent 429 with Retry-After. Zero means no
// limit. Use a *ReportLimits shared by every request (it holds the concurrency slots).
type ReportLimits struct {
	MaxWindows    int // windows of one request (its step over its range)
	MaxCost       int // windows × tenants of one request
	MaxRows       int // tenant rows of one response, over all its windows
	MaxConcurrent int // reports computed at once
	RetryAfter    time.Duration
	MaxAuditRows  int // entries of one GET /api/v1/audit response

	once  sync.Once
	slots chan struct{}
}

// DefaultReportLimits are the flags' defaults: 10,000 windows (a year in hours), one request
// at most 100,000 tenant-windows and 1,000,000 rows, 4 reports at once, 100,000 audit entries.
func DefaultReportLimits() *ReportLimits {
	return &ReportLimits{MaxWindows: 10000, MaxCost: 100000, MaxRows: 1000000, MaxConcurrent: 4, RetryAfter: 5 * time.Second, MaxAuditRows: 100000}
}

// AddReportLimitFlags adds the --api.max-report-* flags to c.
func AddReportLimitFlags(c *kingpin.CmdClause) *ReportLimits {
	l, d := &ReportLimits{}, DefaultReportLimits()
	c.Flag("api.max-report-windows", "Most windows (step over from..to) of one report request; more: 400. 0: no limit.").Default(strconv.Itoa(d.MaxWindows)).IntVar(&l.MaxWindows)
	c.Flag("api.max-report-cost", "Most windows × tenants of one report request; more: 400. 0: no limit.").Default(strconv.Itoa(d.MaxCost)).IntVar(&l.MaxCost)
	c.Flag("api.max-report-rows", "Most rows of one report response; more: 400. 0: no limit.").Default(strconv.Itoa(d.MaxRows)).IntVar(&l.MaxRows)
	c.Flag("api.max-concurrent-reports", "Most reports computed at once; more: 429 with Retry-After. 0: no limit.").Default(strconv.Itoa(d.MaxConcurrent)).IntVar(&l.MaxConcurrent)
	c.Flag("api.report-retry-after", "The Retry-After of a 429.").Default(d.RetryAfter.String()).DurationVar(&l.RetryAfter)
	c.Flag("api.max-audit-rows", "Most entries of one /api/v1/audit response; more: 400. 0: no limit.").Default(strconv.Itoa(d.MaxAuditRows)).IntVar(&l.MaxAuditRows)
	return l
}

// Check refuses negative limits (a usage error for the flags).
func (l *ReportLimits) Check() error {
	if l.MaxWindows < 0 || l.MaxCost < 0 || l.MaxRows < 0 || l.MaxConcurrent < 0 || l.RetryAfter < 0 || l.MaxAuditRows < 0 {
		return fmt.Errorf("--api.max-report-windows, --api.max-report-cost, --api.max-report-rows, --api.max-concurrent-reports, --api.report-retry-after and --api.max-audit-rows must be ≥ 0")
	}
	return nil
}

// reportLimits is s.Limits, or the defaults without a bound on concurrency.
func (s *Server) reportLimits() *ReportLimits {
	if s.Limits != nil {
		return s.Limits
	}
	l := DefaultReportLimits()
	l.MaxConcurrent = 0
	return l
}

// admitReport takes a concurrency slot, or answers 429 with Retry-After; release gives it back.
func (s *Server) admitReport(w http.ResponseWriter) (release func(), ok bool) {
	l := s.reportLimits()
	if l.MaxConcurrent <= 0 {
		return func() {}, true
	}
	l.once.Do(func() { l.slots = make(chan struct{}, l.MaxConcurrent) })
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, true
	default:
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((l.RetryAfter+time.Second-1)/time.Second))))
		s.fail(w, http.StatusTooManyRequests, fmt.Errorf("%d reports are being computed, the limit (--api.max-concurrent-reports); retry later", l.MaxConcurrent))
		return nil, false
	}
}

// checkReportCost answers 400 if windows × tenants of the request exceeds the limits. The
// tenants are those of a scoped request, or in an unfiltered one those with an allocation in
// [from, to) plus the __unallocated__ row.
func (s *Server) checkReportCost(w http.ResponseWriter, r *http.Request, windows int, sc readScope, from, to time.Time) bool {
	l := s.reportLimits()
	if l.MaxWindows > 0 && windows > l.MaxWindows {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter step: %d windows; the limit is %d (--api.max-report-windows): use a coarser step or a shorter range", windows, l.MaxWindows))
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
