package request

import (
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/report"
)

var from, to = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 5, 2, 0, 0, 0, time.UTC)

func parse(t *testing.T, query string) (Request, error) {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(q, from, to, time.UTC)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		query                 string
		format                string
		by                    report.By
		minutes, neighbours   bool
		windows               int
		encoding, contentType string
	}{
		{"", CSV, report.ByTenant, false, false, 1, "", "text/csv; charset=utf-8"},
		{"format=json", JSON, report.ByTenant, false, true, 1, "", "application/json"},
		// Only the JSON report by tenant carries the noisy neighbour (the API's rule, now the command's too).
		{"format=json&by=allocation", JSON, report.ByAllocation, false, false, 1, "", "application/json"},
		{"format=csv&by=tenant&source=minutes&step=15m", CSV, report.ByTenant, true, false, 8, "", "text/csv; charset=utf-8"},
		{"source=samples", CSV, report.ByTenant, false, false, 1, "", "text/csv; charset=utf-8"},
		// FOCUS: one window per hour whatever the step.
		{"format=focus&step=15m", FOCUS, report.ByTenant, false, false, 2, "csv", "text/csv; charset=utf-8"},
		{"format=focus&encoding=parquet", FOCUS, report.ByTenant, false, false, 2, "parquet", "application/vnd.apache.parquet"},
		// The metadata reads no other parameter.
		{"format=focus-metadata&by=x&step=7x", FOCUSMetadata, "", false, false, 0, "", "application/json"},
	} {
		req, err := parse(t, tc.query)
		if err != nil {
			t.Errorf("%q: %v", tc.query, err)
			continue
		}
		if req.Format.Name != tc.format || req.By != tc.by || req.FromMinutes != tc.minutes || req.Neighbours() != tc.neighbours ||
			req.Windows != tc.windows || req.Encoding != focus.Format(tc.encoding) || req.ContentType() != tc.contentType {
			t.Errorf("%q: format %s, by %q, minutes %v, neighbours %v, windows %d, encoding %q, content type %q", tc.query,
				req.Format.Name, req.By, req.FromMinutes, req.Neighbours(), req.Windows, req.Encoding, req.ContentType())
		}
		if req.Lines() != (tc.by == report.ByAllocation) {
			t.Errorf("%q: lines %v", tc.query, req.Lines())
		}
	}
}

// Each error names its parameter, for the API's "query parameter x" and the command's "--x".
func TestParseNamesTheParameter(t *testing.T) {
	for query, want := range map[string]string{
		"format=xml":                `format: report format "xml": expected csv or json (or focus, focus-metadata)`,
		"by=node":                   `by: report rows by "node": expected tenant or allocation`,
		"source=x":                  `source: "x"; expected samples or minutes`,
		"step=7x":                   "step",
		"format=focus&encoding=xls": `encoding: "xls"; expected csv or parquet`,
	} {
		_, err := parse(t, query)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: %v, not a parameter's error", query, err)
			continue
		}
		if got := err.Error(); got != want && e.Param != want {
			t.Errorf("%q: %q, want %q", query, got, want)
		}
	}
}

// The command's --format lists every format but the metadata, which only the API serves.
func TestCommandFormats(t *testing.T) {
	if got := CommandFormats(); !slices.Equal(got, []string{CSV, JSON, FOCUS}) {
		t.Errorf("CommandFormats() = %v", got)
	}
	if got := ReportFormats(); !slices.Equal(got, []string{CSV, JSON}) {
		t.Errorf("ReportFormats() = %v", got)
	}
}
