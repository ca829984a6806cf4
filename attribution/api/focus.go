package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/request"
)

// getFOCUS answers the FOCUS file (focus_version=, 1.3 by default) of [from, to)
// (format=focus), CSV or (encoding=parquet)
// Parquet: one Usage row per allocation per hour, only the scope's tenants. Its metadata is
// format=focus-metadata (the Link header says so).
//
// A month of a large fleet is hundreds of megabytes, so the file is streamed: the first hour
// is encoded before anything is sent, so that what fails there (the first report, a row
// limit) is a 4xx/5xx with a JSON reason; after it the status is 200 and the rest is sent as
// it is encoded, and a later failure cuts the response (the connection is closed without the
// end of the body, so the client sees a truncated transfer, never a short file that looks
// whole) and is logged.
func (s *Server) getFOCUS(w http.ResponseWriter, r *http.Request, sc readScope, req request.Request) {
	from, to := req.From, req.To
	hourly := func(ctx context.Context, from, to time.Time) (report.Report, error) {
		return s.Report(ctx, ReportQuery{From: from, To: to, FromMinutes: req.FromMinutes, Lines: true})
	}
	e := focus.Export{Report: hourly, Zone: s.Zone, Issuer: s.Issuer}
	if e.Issuer == (focus.Issuer{}) {
		e.Issuer = focus.DefaultIssuer
	}
	if !sc.all {
		e.Tenants = nonNil(sc.tenants)
	}
	out := &gate{w: w}
	fw, err := req.FocusVersion.NewWriter(out, req.Encoding)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	limited := &limitRows{Writer: fw, max: s.reportLimits().MaxRows}
	first := focus.FirstHourEnd(from, to, s.Zone)
	_, err = e.Usage(r.Context(), from, first, limited)
	if err == nil && first.Equal(to) {
		err = fw.Close()
	}
	if err != nil {
		s.failFOCUS(w, r, from, to, err)
		return
	}
	if f, ok := fw.(interface{ Flush() error }); ok { // the first hour goes out now
		err = f.Flush()
	}
	w.Header().Set("Content-Type", req.ContentType())
	w.Header().Set("Link", `</api/v1/report?format=focus-metadata>; rel="describedby"`)
	w.WriteHeader(http.StatusOK)
	if err == nil {
		err = out.open()
	}
	if err != nil {
		s.logger().DebugContext(r.Context(), "sending a FOCUS export failed", "err", err)
		return
	}
	if first.Equal(to) {
		return
	}
	if _, err = e.Usage(r.Context(), first, to, limited); err == nil {
		err = fw.Close()
	}
	if err != nil {
		level := slog.LevelError
		if r.Context().Err() != nil { // the client went away
			level = slog.LevelDebug
		}
		s.logger().Log(r.Context(), level, "a FOCUS export failed after its first hour was sent: the response is cut",
			"from", from, "to", to, "rows", limited.rows, "err", err)
		panic(http.ErrAbortHandler) // closes the connection without ending the body
	}
}

// failFOCUS answers an export that failed before anything was sent.
func (s *Server) failFOCUS(w http.ResponseWriter, r *http.Request, from, to time.Time, err error) {
	var over *tooManyRows
	if errors.As(err, &over) {
		s.checkReportRows(w, over.rows) // answers the 400
		return
	}
	s.logger().ErrorContext(r.Context(), "computing a FOCUS export failed", "from", from, "to", to, "err", err)
	s.fail(w, http.StatusInternalServerError, fmt.Errorf("FOCUS export of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err))
}

// gate holds what is written to it until open, then writes through to w and flushes what it
// held: the response is committed only once the first hour has been encoded.
type gate struct {
	w      http.ResponseWriter
	held   bytes.Buffer
	opened bool
}

func (g *gate) Write(p []byte) (int, error) {
	if !g.opened {
		return g.held.Write(p)
	}
	return g.w.Write(p)
}

func (g *gate) open() error {
	g.opened = true
	if _, err := g.held.WriteTo(g.w); err != nil {
		return err
	}
	g.held = bytes.Buffer{}
	if err := http.NewResponseController(g.w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// limitRows stops a FOCUS export once it has more rows than the report limits allow
// (--api.max-report-rows; 0: no limit).
type limitRows struct {
	focus.Writer
	max, rows int
}

// tooManyRows is the error of an export over the row limit.
type tooManyRows struct{ rows, max int }

func (e *tooManyRows) Error() string {
	return fmt.Sprintf("more than %d rows; the limit is %d (--api.max-report-rows)", e.max, e.max)
}

func (l *limitRows) Write(row focus.Row) error {
	if l.rows++; l.max > 0 && l.rows > l.max {
		return &tooManyRows{rows: l.rows, max: l.max}
	}
	return l.Writer.Write(row)
}
