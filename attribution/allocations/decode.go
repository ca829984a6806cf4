// Package allocations takes tenants' allocations in over HTTP and from files: it decodes and
// validates them, refuses overlaps on an instance, and stores them in ClickHouse's allocations
// table, idempotently by allocation id. The Kafka topic is consumed by the collector, which
// stores the events itself under the same overlap rule (eventcheck.Check).
package allocations

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Columns are the CSV header of an allocations file, in this order or any other.
var Columns = allocation.Fields

// Decode reads allocations from a file's content: CSV when the name ends in .csv, JSON
// otherwise (an array of objects, one object, or one object per line).
func Decode(source string, data []byte) ([]allocation.Allocation, error) {
	return DecodeKnownTiers(source, data, nil)
}

// DecodeKnownTiers is Decode that also refuses an allocation whose tier is not one of tiers
// (a price book's; nil: any tier), naming its line: it could not be priced.
func DecodeKnownTiers(source string, data []byte, tiers map[string]float64) ([]allocation.Allocation, error) {
	allocs, _, err := DecodeLines(source, data, tiers)
	return allocs, err
}

// DecodeLines is DecodeKnownTiers that also returns the line each allocation starts on, for
// AtLine to name the line of a refusal found later (an overlap, an id given twice).
func DecodeLines(source string, data []byte, tiers map[string]float64) ([]allocation.Allocation, []int, error) {
	if strings.EqualFold(filepath.Ext(source), ".csv") {
		return decodeCSV(source, data, tiers)
	}
	return decodeJSON(source, data, tiers)
}

// AtLine names in err, a refusal of Store.Put, the source and the line of the allocation it
// refused (lines from DecodeLines), or the source alone when no one allocation is at fault.
func AtLine(source string, lines []int, err error) error {
	var c *allocation.Conflict
	if errors.As(err, &c) && c.Index >= 0 && c.Index < len(lines) {
		return fmt.Errorf("%s: line %d: %w", source, lines[c.Index], err)
	}
	return fmt.Errorf("%s: %w", source, err)
}

// DecodeJSON reads a JSON array of allocations, a single allocation, or one per line. Unknown
// fields are refused. Every error names source, line and field.
func DecodeJSON(source string, data []byte) ([]allocation.Allocation, error) {
	allocs, _, err := decodeJSON(source, data, nil)
	return allocs, err
}

func decodeJSON(source string, data []byte, tiers map[string]float64) ([]allocation.Allocation, []int, error) {
	lineAt := newLineCounter(data).at
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil, &allocation.Error{Source: source, Line: 1, Value: "no allocations", Expected: "a JSON array of allocations or one allocation object"}
	}
	var raws []json.RawMessage
	var offsets []int64
	dec := json.NewDecoder(bytes.NewReader(data))
	if trimmed[0] == '[' {
		if _, err := dec.Token(); err != nil {
			return nil, nil, jsonSyntax(source, syntaxLine(lineAt, err, dec.InputOffset()), err)
		}
		for dec.More() {
			offsets = append(offsets, dec.InputOffset())
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, jsonSyntax(source, syntaxLine(lineAt, err, dec.InputOffset()), err)
			}
			raws = append(raws, raw)
		}
		if _, err := dec.Token(); err != nil {
			return nil, nil, jsonSyntax(source, syntaxLine(lineAt, err, dec.InputOffset()), err)
		}
	} else {
		for {
			off := dec.InputOffset()
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, nil, jsonSyntax(source, syntaxLine(lineAt, err, dec.InputOffset()), err)
			}
			offsets = append(offsets, off)
			raws = append(raws, raw)
		}
	}
	out := make([]allocation.Allocation, 0, len(raws))
	lines := make([]int, 0, len(raws))
	for i, raw := range raws {
		// The object starts after the whitespace that precedes it.
		line := lineAt(offsets[i] + int64(len(data[offsets[i]:])-len(bytes.TrimLeft(data[offsets[i]:], " \t\r\n,"))))
		a, err := decodeObject(source, line, raw, tiers)
		if err != nil {
			return nil, nil, err
		}
		out, lines = append(out, a), append(lines, line)
	}
	return out, lines, nil
}

// lineCounter finds the line of byte offsets into data. The offsets it is asked for mostly
// increase (one per object, in order), so it counts on from the last one instead of from the
// start: counting from the start for every object made decoding 100,000 of them quadratic
// (3 minutes).
type lineCounter struct {
	data   []byte
	offset int // counted up to here
	line   int // the line data[offset] is on
}

func newLineCounter(data []byte) *lineCounter { return &lineCounter{data: data, line: 1} }

// at is the line (from 1) of the byte at offset; past the end, the last line.
func (c *lineCounter) at(offset int64) int {
	to := min(int(max(offset, 0)), len(c.data))
	if to < c.offset { // back: rare (an error's offset); count again from the start
		c.offset, c.line = 0, 1
	}
	c.line += bytes.Count(c.data[c.offset:to], []byte("\n"))
	c.offset = to
	return c.line
}

func jsonSyntax(source string, line int, err error) error {
	return &allocation.Error{Source: source, Line: line, Value: "malformed JSON (" + err.Error() + ")", Expected: "a JSON array of allocation objects"}
}

// syntaxLine is the line of a JSON syntax error (its offset counts from the input's start), or
// fallback when the error has no offset.
func syntaxLine(lineAt func(int64) int, err error, fallback int64) int {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return lineAt(se.Offset)
	}
	return lineAt(fallback)
}

func decodeObject(source string, line int, raw json.RawMessage, tiers map[string]float64) (allocation.Allocation, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var j allocation.JSON
	if err := dec.Decode(&j); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return allocation.Allocation{}, &allocation.Error{Source: source, Line: line, Field: typeErr.Field, Value: "a JSON " + typeErr.Value, Expected: "a string"}
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return allocation.Allocation{}, &allocation.Error{Source: source, Line: line, Field: field, Value: "unknown field", Expected: "one of " + strings.Join(Columns, ", ")}
		default:
			return allocation.Allocation{}, &allocation.Error{Source: source, Line: line, Value: "not an allocation object (" + err.Error() + ")", Expected: "an object with " + strings.Join(Columns, ", ")}
		}
	}
	return build(source, line, j.Values(), tiers)
}

// build parses the text of the columns (in Columns order) into a validated allocation, at one
// of tiers unless tiers is nil.
func build(source string, line int, v []string, tiers map[string]float64) (allocation.Allocation, error) {
	a := allocation.Allocation{ID: v[0], Tenant: v[1], Tier: v[2], Node: v[3], Instance: v[4]}
	for i, dst := range []*time.Time{&a.RequestedAt, &a.StartedAt, &a.EndedAt} {
		text := strings.TrimSpace(v[5+i])
		if text == "" {
			continue // required ones are reported by validate
		}
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return allocation.Allocation{}, &allocation.Error{Source: source, Line: line, Field: Columns[5+i], Value: fmt.Sprintf("%q", text), Expected: "an RFC 3339 time such as 2026-01-05T00:00:00Z"}
		}
		// Checked as given, before anything converts it to nanoseconds (which wrap after 2262).
		if r := validate.CheckTime(Columns[5+i], fmt.Sprintf("%q", text), t); r != nil {
			return allocation.Allocation{}, &allocation.Error{Source: source, Line: line, Field: r.Field, Value: r.Value, Expected: r.Expected, Reason: r.Reason}
		}
		*dst = t.UTC()
	}
	if err := a.Validate(source, line); err != nil {
		return allocation.Allocation{}, err
	}
	if tiers != nil {
		if r := validate.CheckTier(a.Tier, tiers); r != nil {
			return allocation.Allocation{}, &allocation.Error{Source: source, Line: line, Field: r.Field, Value: r.Value, Expected: r.Expected, Reason: r.Reason}
		}
	}
	return a, nil
}

// DecodeCSV reads a CSV file whose header names the Columns (any order; ended_at may be left
// out). Every error names source, line and field.
func DecodeCSV(source string, data []byte) ([]allocation.Allocation, error) {
	allocs, _, err := decodeCSV(source, data, nil)
	return allocs, err
}

func decodeCSV(source string, data []byte, tiers map[string]float64) ([]allocation.Allocation, []int, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil, &allocation.Error{Source: source, Line: 1, Value: "empty file", Expected: "a header: " + strings.Join(Columns, ",")}
	}
	if err != nil {
		return nil, nil, csvSyntax(source, err)
	}
	index := map[string]int{}
	for i, name := range header {
		name = strings.TrimSpace(name)
		if !containsString(Columns, name) {
			return nil, nil, &allocation.Error{Source: source, Line: 1, Field: name, Value: "unknown column", Expected: "columns " + strings.Join(Columns, ",")}
		}
		if _, dup := index[name]; dup {
			return nil, nil, &allocation.Error{Source: source, Line: 1, Field: name, Value: "column given twice", Expected: "each column once"}
		}
		index[name] = i
	}
	for _, name := range Columns[:7] {
		if _, ok := index[name]; !ok {
			return nil, nil, &allocation.Error{Source: source, Line: 1, Field: name, Value: "missing column", Expected: "columns " + strings.Join(Columns, ",")}
		}
	}
	var (
		out   []allocation.Allocation
		lines []int
	)
	for {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, csvSyntax(source, err)
		}
		line, _ := r.FieldPos(0)
		if len(record) != len(header) {
			return nil, nil, &allocation.Error{Source: source, Line: line, Value: fmt.Sprintf("%d fields", len(record)), Expected: fmt.Sprintf("%d, as in the header", len(header))}
		}
		values := make([]string, len(Columns))
		for i, name := range Columns {
			if j, ok := index[name]; ok {
				values[i] = record[j]
			}
		}
		a, err := build(source, line, values, tiers)
		if err != nil {
			return nil, nil, err
		}
		out, lines = append(out, a), append(lines, line)
	}
	if len(out) == 0 {
		return nil, nil, &allocation.Error{Source: source, Line: 2, Value: "no allocations", Expected: "one allocation per line after the header"}
	}
	return out, lines, nil
}

func csvSyntax(source string, err error) error {
	line := 0
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		line = pe.Line
		err = pe.Err
	}
	return &allocation.Error{Source: source, Line: line, Value: "malformed CSV (" + err.Error() + ")", Expected: "comma-separated values with a header"}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
