// Package request is a report request: what `slicemeter report`'s flags and the API's
// GET /api/v1/report query parameters ask for, parsed by one function, so that the command and
// the API cannot disagree on what a set of parameters means.
package request

import (
	"fmt"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// Params are a request's parameters by their API names (format, by, source, step, encoding):
// the API's query (url.Values) or the command's flags.
type Params interface {
	Get(name string) string
}

// Request is a parsed report request.
type Request struct {
	From, To time.Time
	Format   Format
	By       report.By
	// Step cuts [From, To) into windows (report.WindowsIn); empty: one window.
	Step string
	// FromMinutes sums the minutes the attribution service stored (source=minutes) instead of
	// computing from the samples.
	FromMinutes bool
	// Encoding is the FOCUS export's file format (encoding=, --focus.file-format).
	Encoding focus.Format
	// FocusVersion is the FOCUS export's version, of its file and its metadata
	// (focus_version=, --focus.version; empty: focus.DefaultVersion).
	FocusVersion focus.Version
	// Windows is how many windows the request builds, counted before anything is read: the
	// steps, or the hours of FOCUS rows (one row per allocation per hour, whatever the step).
	Windows int
}

// Neighbours says whether the request needs each tenant's noisy neighbour: only the JSON
// report by tenant carries it, so nothing else pays for computing it.
func (r Request) Neighbours() bool { return r.Format.Name == JSON && r.By == report.ByTenant }

// Lines says whether the request needs the line items (one row per allocation).
func (r Request) Lines() bool { return r.By == report.ByAllocation }

// Error is a parameter that cannot be parsed; each door names it its way (the API "query
// parameter step", the command "--step").
type Error struct {
	Param string
	Err   error
}

func (e *Error) Error() string { return e.Param + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Parse reads a report request of [from, to) from its parameters, in this order: format (csv
// when empty), by, source (samples or minutes), step (its windows counted in zone) and, for the
// FOCUS export, encoding (csv or parquet). The FOCUS export and its metadata read
// focus_version (1.3 or 1.2) first; the metadata format reads no other parameter.
func Parse(p Params, from, to time.Time, zone *time.Location) (Request, error) {
	req := Request{From: from, To: to}
	name := p.Get("format")
	if name == "" {
		name = CSV
	}
	f, ok := Lookup(name)
	if !ok {
		return Request{}, &Error{"format", fmt.Errorf("report format %q: expected %s", name, expected())}
	}
	req.Format = f
	if f.FOCUS || f.Metadata {
		v, err := focus.ParseVersion(p.Get("focus_version"))
		if err != nil {
			return Request{}, &Error{"focus_version", err}
		}
		req.FocusVersion = v
	}
	if f.Metadata {
		return req, nil
	}
	by, err := report.ParseBy(p.Get("by"))
	if err != nil {
		return Request{}, &Error{"by", err}
	}
	req.By = by
	switch src := p.Get("source"); src {
	case "", "samples":
	case "minutes":
		req.FromMinutes = true
	default:
		return Request{}, &Error{"source", fmt.Errorf("%q; expected samples or minutes", src)}
	}
	req.Step = p.Get("step")
	if req.Windows, err = report.CountWindows(from, to, req.Step, zone); err != nil {
		return Request{}, &Error{"step", err}
	}
	if !f.FOCUS {
		return req, nil
	}
	req.Windows = focus.CountHours(from, to, zone)
	switch enc := focus.Format(p.Get("encoding")); enc {
	case "", focus.CSV:
		req.Encoding = focus.CSV
	case focus.Parquet:
		req.Encoding = enc
	default:
		return Request{}, &Error{"encoding", fmt.Errorf("%q; expected csv or parquet", enc)}
	}
	return req, nil
}
