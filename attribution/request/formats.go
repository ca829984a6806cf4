package request

import (
	"io"
	"strings"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// The names of the formats.
const (
	CSV           = "csv"
	JSON          = "json"
	FOCUS         = "focus"
	FOCUSMetadata = "focus-metadata"
)

// Format is one way a report is written: its name (--format, format=), the content type the API
// sends it with, and its writer. A new report format is a writer and a row of formats.
type Format struct {
	Name        string
	ContentType string
	// Write writes the reports of the request's windows, one row per tenant or per allocation;
	// nil for the FOCUS formats, which focus.Export writes hour by hour.
	Write func(w io.Writer, s report.Series, by report.By) error
	// FOCUS is the FinOps FOCUS export: one row per allocation per hour, in the request's
	// Encoding (whose content type is encodings').
	FOCUS bool
	// Metadata is the FOCUS metadata: it depends on no window, and only the API serves it
	// (the command writes it beside the export, --focus.metadata).
	Metadata bool
}

var formats = []Format{
	{Name: CSV, ContentType: "text/csv; charset=utf-8", Write: func(w io.Writer, s report.Series, by report.By) error { return s.WriteBy(w, report.CSV, by) }},
	{Name: JSON, ContentType: "application/json", Write: func(w io.Writer, s report.Series, by report.By) error { return s.WriteBy(w, report.JSON, by) }},
	{Name: FOCUS, ContentType: "text/csv; charset=utf-8", FOCUS: true},
	{Name: FOCUSMetadata, ContentType: "application/json", Metadata: true},
}

// encodings are the content types of the FOCUS export's file formats.
var encodings = map[focus.Format]string{
	focus.CSV:     "text/csv; charset=utf-8",
	focus.Parquet: "application/vnd.apache.parquet",
}

// ContentType is what the API answers the request with.
func (r Request) ContentType() string {
	if r.Format.FOCUS {
		return encodings[r.Encoding]
	}
	return r.Format.ContentType
}

// Lookup finds a format by name.
func Lookup(name string) (Format, bool) {
	for _, f := range formats {
		if f.Name == name {
			return f, true
		}
	}
	return Format{}, false
}

// CommandFormats are the names --format accepts: every format but the metadata.
func CommandFormats() []string {
	var names []string
	for _, f := range formats {
		if !f.Metadata {
			names = append(names, f.Name)
		}
	}
	return names
}

// ReportFormats are the names of the formats that write a report's rows (not FOCUS's).
func ReportFormats() []string {
	var names []string
	for _, f := range formats {
		if f.Write != nil {
			names = append(names, f.Name)
		}
	}
	return names
}

// expected lists the formats for an error: "csv or json (or focus, focus-metadata)", the
// reports' formats first.
func expected() string {
	var others []string
	for _, f := range formats {
		if f.Write == nil {
			others = append(others, f.Name)
		}
	}
	return strings.Join(ReportFormats(), " or ") + " (or " + strings.Join(others, ", ") + ")"
}
