package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Format is how a report is written.
type Format string

// The formats of `slicemeter report --format`.
const (
	CSV  Format = "csv"
	JSON Format = "json"
)

// ParseFormat checks a --format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case CSV, JSON:
		return f, nil
	default:
		return "", fmt.Errorf("report format %q: expected csv or json", s)
	}
}

// Write writes the report in the format.
func (r Report) Write(w io.Writer, f Format) error { return Series{r}.Write(w, f) }

// WriteCSV writes the header, then one line per row (see Rows).
func (r Report) WriteCSV(w io.Writer) error { return Series{r}.WriteCSV(w) }

// WriteJSON writes an array with one object per row, keys as the CSV header names in column
// order, numbers as numbers (with the CSV's decimals) and empty values as null.
func (r Report) WriteJSON(w io.Writer) error { return Series{r}.WriteJSON(w) }

// Series is the reports of consecutive windows (`slicemeter report --step`), written as one
// table: the header once, then each window's rows in window order.
type Series []Report

// Write writes the series in the format.
func (s Series) Write(w io.Writer, f Format) error {
	switch f {
	case CSV:
		return s.WriteCSV(w)
	case JSON:
		return s.WriteJSON(w)
	default:
		return fmt.Errorf("report format %q: expected csv or json", f)
	}
}

// WriteCSV writes the header, then one line per row of every window.
func (s Series) WriteCSV(w io.Writer) error {
	table, err := s.cells()
	if err != nil {
		return err
	}
	return writeCSV(w, Header(), table)
}

// writeCSV writes the header and the table, text cells made spreadsheet-safe.
func writeCSV(w io.Writer, header []string, table [][]cell) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	for _, cells := range table {
		record := make([]string, len(cells))
		for i, c := range cells {
			record[i] = c.text
			if !c.number {
				record[i] = SpreadsheetSafe(c.text)
			}
		}
		if err := cw.Write(record); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// SpreadsheetSafe is a text cell that a spreadsheet opening the CSV shows as text: one
// starting with = + - @, tab or CR would be evaluated as a formula (CSV injection), so it gets
// a leading '. Tenant names are already refused with those starts at every door; this also
// covers tiers, currencies and names stored before that rule. Number cells are never changed:
// a spreadsheet must still read them as numbers.
func SpreadsheetSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// WriteJSON writes one array of the rows of every window (see Report.WriteJSON), each with
// the CSV's columns and then noisy_neighbour, noisy_neighbour_share and memory_efficiency (4
// decimals; null where not known) and energy_kwh
// (6 decimals; null where not known). A window with something unpriced gives its
// __unallocated__ row one more key, notes: an array of the notes of Report.Unpriced (what was
// left out of the money and the capacity); the other notes are for the log.
func (s Series) WriteJSON(w io.Writer) error {
	table, err := s.cells()
	if err != nil {
		return err
	}
	notes := make([][]string, len(table))
	i := 0
	for _, r := range s {
		rows := r.Rows()
		for j, row := range rows {
			table[i] = append(table[i], cell{text: row.NoisyNeighbour}, optional(row.NoisyNeighbourShare, 4), optional(row.MemoryEfficiency, 4), optional(row.EnergyKWh, 6))
			if !r.OmitUnallocated && j == len(rows)-1-len(r.Corrections) { // the __unallocated__ row, before the corrections
				for _, u := range r.Unpriced {
					notes[i] = append(notes[i], u.Note())
				}
			}
			i++
		}
	}
	return writeJSON(w, append(Header(), "noisy_neighbour", "noisy_neighbour_share", "memory_efficiency", "energy_kwh"), table, notes)
}

// optional is a JSON-only number cell, empty (null) when v is nil or not finite.
func optional(v *float64, decimals int) cell {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return cell{}
	}
	return cell{text: fixed(*v, decimals), number: true}
}

// writeJSON writes one array of objects, one per row of the table, keys from the header;
// notes[i], when there are any, are row i's "notes".
func writeJSON(w io.Writer, header []string, table [][]cell, notes [][]string) error {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, cells := range table {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteByte('{')
		for j, c := range cells {
			if j > 0 {
				buf.WriteByte(',')
			}
			key, _ := json.Marshal(header[j])
			buf.Write(key)
			buf.WriteByte(':')
			switch {
			case c.text == "":
				buf.WriteString("null")
			case c.number:
				buf.WriteString(c.text)
			default:
				s, _ := json.Marshal(c.text)
				buf.Write(s)
			}
		}
		if i < len(notes) && len(notes[i]) > 0 {
			n, _ := json.Marshal(notes[i])
			buf.WriteString(`,"notes":`)
			buf.Write(n)
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return fmt.Errorf("write report as JSON: %w", err)
	}
	out.WriteByte('\n')
	if _, err := out.WriteTo(w); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func (s Series) cells() ([][]cell, error) {
	var table [][]cell
	for _, r := range s {
		t, err := r.cells()
		if err != nil {
			return nil, err
		}
		table = append(table, t...)
	}
	return table, nil
}

func (r Report) cells() ([][]cell, error) {
	rows := r.Rows()
	table := make([][]cell, 0, len(rows))
	for _, row := range rows {
		c, err := row.cells()
		if err != nil {
			return nil, err
		}
		table = append(table, c)
	}
	return table, nil
}
