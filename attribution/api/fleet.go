package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/slicemeter/slicemeter/attribution/fleet"
)

// FleetQuery is a request of the fleet report: one window of whole minutes, one grouping.
type FleetQuery struct {
	From, To time.Time
	By       fleet.By
}

// Fleeter computes the fleet report's rows (fleet.Compute with the service's settings).
type Fleeter func(ctx context.Context, q FleetQuery) ([]fleet.Row, error)

// getFleet answers the fleet report of [from, to) (whole minutes), by model (default), node or
// gpu, as CSV (default) or JSON; 409 while some minute of the window is not attributed (the
// error names the first). It describes the whole fleet and its revenue, so only the
// roles that read every tenant (operator, finance) may have it.
func (s *Server) getFleet(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	if !p.readsAll() {
		s.forbid(w, p, "read the fleet report (operator and finance only)")
		return
	}
	if s.Fleet == nil {
		s.fail(w, http.StatusNotImplemented, fmt.Errorf("this server does not serve the fleet report"))
		return
	}
	q := r.URL.Query()
	var times [2]time.Time
	for i, name := range []string{"from", "to"} {
		if times[i], ok = s.queryTime(w, name, q.Get(name), " on a whole minute such as 2026-01-05T00:00:00Z"); !ok {
			return
		}
	}
	// A window reaching past what can be attributed by now stops there, as the CLI's --to
	// does, instead of waiting (503) for minutes that have not happened.
	end, _, err := fleet.Horizon("query parameter from", times[0], times[1], s.ready())
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	times[1] = end
	if err := fleet.CheckWindow(times[0], times[1]); err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameters from and to: %w", err))
		return
	}
	// Its cost is its hours (one roll-up each, and an hour's minutes at most at each edge),
	// counted before anything is read.
	if !s.checkWindows(w, "query parameters from and to", fleet.CountHours(times[0], times[1]), "hours") {
		return
	}
	by := fleet.ByModel
	if v := q.Get("by"); v != "" {
		var err error
		if by, err = fleet.ParseBy(v); err != nil {
			s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter by: %w", err))
			return
		}
	}
	format := fleet.Format(q.Get("format"))
	switch format {
	case "":
		format = fleet.CSV
	case fleet.CSV, fleet.JSON:
	default:
		s.fail(w, http.StatusBadRequest, fmt.Errorf("query parameter format: %q; expected csv or json", format))
		return
	}
	release, ok := s.admitReport(w, r, p)
	if !ok {
		return
	}
	defer release()
	rows, err := s.Fleet(r.Context(), FleetQuery{From: times[0], To: times[1], By: by})
	if err != nil {
		err = fmt.Errorf("fleet report of [%s, %s): %w", times[0].Format(time.RFC3339), times[1].Format(time.RFC3339), err)
		if s.notYet(w, err, "") {
			// The window's stored minutes are not all there yet: ask again later.
			return
		}
		s.logger().ErrorContext(r.Context(), "computing the fleet report failed", "from", times[0], "to", times[1], "err", err)
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	var body bytes.Buffer
	if err := fleet.Write(&body, rows, format); err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	if format == fleet.CSV {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	if _, err := body.WriteTo(w); err != nil {
		s.logger().DebugContext(r.Context(), "sending the fleet report failed", "err", err)
	}
}
