package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// Periods lists and closes billing periods (attribution/period over the database and the
// price book).
type Periods interface {
	List(ctx context.Context) ([]period.Closed, error)
	Close(ctx context.Context, m period.Month, now time.Time) (period.Closed, error)
}

// focusVersionCloser is a Periods that can write a close's FOCUS files in a version other
// than its own (the API's focus_version=).
type focusVersionCloser interface {
	CloseFOCUS(ctx context.Context, m period.Month, now time.Time, v focus.Version) (period.Closed, error)
}

// periodJSON is a closed period on the wire: its totals as decimal strings with the report's
// 6 decimals (as `slicemeter period list` prints them), never floats.
type periodJSON struct {
	Period              string `json:"period"`
	Version             uint32 `json:"version"`
	Timezone            string `json:"timezone"`
	WindowStart         string `json:"window_start"`
	WindowEnd           string `json:"window_end"`
	ClosedAt            string `json:"closed_at"`
	Currency            string `json:"currency"`
	ListCost            string `json:"list_cost"`
	Cost                string `json:"cost"`
	WasteCost           string `json:"waste_cost"`
	OverheadCost        string `json:"overhead_cost"`
	UnallocatedListCost string `json:"unallocated_list_cost"`
	CorrectionCost      string `json:"correction_cost"`
}

func toPeriodJSON(c period.Closed) periodJSON {
	return periodJSON{Period: c.Period.String(), Version: c.Version, Timezone: c.Timezone,
		WindowStart: c.Start.Format(time.RFC3339), WindowEnd: c.End.Format(time.RFC3339), ClosedAt: c.ClosedAt.Format(time.RFC3339Nano),
		Currency: c.Currency, ListCost: c.ListCost.StringFixed(6), Cost: c.Cost.StringFixed(6), WasteCost: c.WasteCost.StringFixed(6),
		OverheadCost: c.OverheadCost.StringFixed(6), UnallocatedListCost: c.UnallocatedListCost.StringFixed(6), CorrectionCost: c.CorrectionCost.StringFixed(6)}
}

// periodPrincipal admits the roles that see and close periods: operator and finance. A
// period's totals are every tenant's, so a tenant (and a scheduler) gets 403.
func (s *Server) periodPrincipal(w http.ResponseWriter, r *http.Request, what string) (Principal, bool) {
	p, ok := s.principal(w, r)
	if !ok {
		return p, false
	}
	if !p.readsAll() {
		s.forbid(w, p, what+" (operator and finance only: a period's totals are every tenant's)")
		return p, false
	}
	if s.Periods == nil {
		s.fail(w, http.StatusNotImplemented, errors.New("this server has no billing periods"))
		return p, false
	}
	return p, true
}

// getPeriods lists the closed billing periods, in period order.
func (s *Server) getPeriods(w http.ResponseWriter, r *http.Request) {
	p, ok := s.periodPrincipal(w, r, "list billing periods")
	if !ok {
		return
	}
	release, ok := s.admitReport(w, r, p)
	if !ok {
		return
	}
	defer release()
	closed, err := s.Periods.List(r.Context())
	if err != nil {
		s.logger().ErrorContext(r.Context(), "listing billing periods failed", "err", err)
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	out := make([]periodJSON, len(closed))
	for i, c := range closed {
		out[i] = toPeriodJSON(c)
	}
	writeJSON(w, http.StatusOK, out)
}

// closePeriod closes the billing period {period} (YYYY-MM) now, as `slicemeter period close`
// does: 200 with the closed period; 409 when it is closed already, not over, before a closed
// period, or not all attributed yet (its stored minutes are the service's).
func (s *Server) closePeriod(w http.ResponseWriter, r *http.Request) {
	p, ok := s.periodPrincipal(w, r, "close billing periods")
	if !ok {
		return
	}
	m, err := period.Parse(r.PathValue("period"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("path: %w", err))
		return
	}
	if !s.checkPeriod(w, "path period", r.PathValue("period"), m) {
		return
	}
	// focus_version= (--focus.version's name on the API) says the version of the FOCUS files
	// the close writes; without it, the service's --focus.version.
	var v focus.Version
	if q := r.URL.Query().Get("focus_version"); q != "" {
		if v, err = focus.ParseVersion(q); err != nil {
			s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter focus_version: %w", err))
			return
		}
	}
	release, ok := s.admitReport(w, r, p) // a close computes the month's bill
	if !ok {
		return
	}
	defer release()
	var closed period.Closed
	if vc, ok := s.Periods.(focusVersionCloser); ok && v != "" {
		closed, err = vc.CloseFOCUS(r.Context(), m, time.Now(), v)
	} else {
		closed, err = s.Periods.Close(r.Context(), m, time.Now())
	}
	switch {
	case errors.Is(err, period.ErrClosed), errors.Is(err, period.ErrNotOver), errors.Is(err, period.ErrOutOfOrder), errors.Is(err, stored.ErrNotAttributed),
		errors.Is(err, period.ErrOwed):
		if errors.Is(err, stored.ErrNotAttributed) || errors.Is(err, period.ErrOwed) {
			// The service attributes the minutes the close needs (they are owed now): the
			// close can be asked again once they are.
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(s.notYetRetry().Seconds()))))
		}
		s.fail(w, http.StatusConflict, err)
		return
	case err != nil:
		s.logger().ErrorContext(r.Context(), "closing a billing period failed", "period", m.String(), "err", err)
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.logger().InfoContext(r.Context(), "billing period closed", "period", m.String(), "by", p.Name, "version", closed.Version, "cost", closed.Cost.StringFixed(6))
	writeJSON(w, http.StatusOK, toPeriodJSON(closed))
}
