package focus

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// The cells of a row are appended to byte slices rather than made strings one by one: an
// export writes tens of cells per allocation and hour, and their allocations were most of its
// Go time.

// appendDecimal appends a FOCUS decimal: in full, never with an exponent, always with a
// decimal point (a reader that infers types, pandas, takes a column of whole numbers for
// integers, and FOCUS's are decimals); NaN and infinities are null (nothing).
func appendDecimal(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return b
	}
	n := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	for _, c := range b[n:] {
		if c == '.' {
			return b
		}
	}
	return append(b, ".0"...)
}

// MoneyScale is the decimal places of every money cell (BilledCost, the unit prices, the x_
// costs): the scale of the money columns slicemeter stores (stored.MoneyScale, Decimal(38,
// 12)). An amount is rounded there as a Decimal and printed from it, so that a file never
// carries a float's noise (0.21202777777777776) and Σ of a tenant's rows stays its report's
// cost far below the report's 6 decimals.
const MoneyScale = stored.MoneyScale

// money is an amount as a Decimal at MoneyScale; ok is false for NaN and ±Inf (a null cell).
func money(v float64) (d decimal.Decimal, ok bool) {
	d, err := stored.Money(v)
	return d, err == nil
}

// appendMoney appends an amount as a FOCUS decimal at MoneyScale (trailing zeros dropped,
// always with a decimal point, as appendDecimal); NaN and infinities are null. It is
// stored.Money's Decimal printed (decimal.NewFromFloat(v).Round(MoneyScale).String(): the
// float's shortest decimal form rounded half away from zero), done on the digits without
// allocating: an export writes eight amounts per row.
func appendMoney(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return b
	}
	var tmp [64]byte
	digits, neg := roundedDigits(tmp[:0], v)
	if neg {
		b = append(b, '-')
	}
	b = append(b, digits...)
	if bytes.IndexByte(digits, '.') < 0 {
		b = append(b, ".0"...)
	}
	return b
}

// roundedDigits appends |v|'s shortest decimal form rounded half away from zero to MoneyScale
// places, without trailing zeros (nor a point when nothing is left after it), to b; neg says
// whether the amount is negative (never for one that rounds to zero).
func roundedDigits(b []byte, v float64) (digits []byte, neg bool) {
	neg = v < 0
	b = strconv.AppendFloat(b, math.Abs(v), 'f', -1, 64)
	point := bytes.IndexByte(b, '.')
	if point >= 0 && len(b)-point-1 > MoneyScale {
		up := b[point+1+MoneyScale] >= '5'
		b = b[:point+1+MoneyScale]
		for i := len(b) - 1; up && i >= 0; i-- {
			switch {
			case b[i] == '.':
			case b[i] == '9':
				b[i] = '0'
			default:
				b[i]++
				up = false
			}
		}
		if up { // 9.99… became 10.00…
			b = append(b, 0)
			copy(b[1:], b)
			b[0] = '1'
			point++
		}
	}
	if point >= 0 {
		b = bytes.TrimRight(b, "0")
		b = bytes.TrimSuffix(b, []byte("."))
	}
	if neg && len(bytes.Trim(b, "0.")) == 0 {
		neg = false
	}
	return b, neg
}

// appendDateTime appends t in UTC as DateTime.
func appendDateTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, DateTime)
	}
	h, mi, s := t.Clock()
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	b = append(b, byte('0'+mo/10), byte('0'+mo%10), '-', byte('0'+d/10), byte('0'+d%10), 'T')
	return append(b, byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':', byte('0'+s/10), byte('0'+s%10), 'Z')
}

// appendJSONString appends s as encoding/json writes it: as it is when it needs no escape
// (plain ASCII without quotes, backslashes or HTML's <, > and &), else through json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// appendJSONFloat appends v as encoding/json writes a float64 (null where it cannot).
func appendJSONFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		q, _ := json.Marshal(v)
		return append(b, q...)
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

// csvLine is a cellSink appending a CSV record as encoding/csv writes it (comma-separated,
// LF-terminated, a field quoted where it needs to be).
type csvLine struct {
	b []byte
	n int // cells so far
}

func (c *csvLine) sep() {
	if c.n > 0 {
		c.b = append(c.b, ',')
	}
	c.n++
}

// text appends a text cell, with a leading ' where a spreadsheet would evaluate it as a
// formula (report.SpreadsheetSafe, as the other CSV writers do): an allocation id or a
// description is a scheduler's text. Parquet keeps the raw value.
func (c *csvLine) text(s string) {
	c.sep()
	s = report.SpreadsheetSafe(s)
	if !csvNeedsQuotes(s) {
		c.b = append(c.b, s...)
		return
	}
	c.b = append(c.b, '"')
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			break
		}
		c.b = append(append(c.b, s[:i+1]...), '"') // a quote doubled
		s = s[i+1:]
	}
	c.b = append(append(c.b, s...), '"')
}

func (c *csvLine) optText(s *string) {
	if s == nil {
		c.sep()
		return
	}
	c.text(*s)
}

func (c *csvLine) num(v float64) {
	c.sep()
	c.b = appendDecimal(c.b, v)
}

func (c *csvLine) optNum(v *float64) {
	c.sep()
	if v != nil {
		c.b = appendDecimal(c.b, *v)
	}
}

func (c *csvLine) money(v float64) {
	c.sep()
	c.b = appendMoney(c.b, v)
}

func (c *csvLine) optMoney(v *float64) {
	c.sep()
	if v != nil {
		c.b = appendMoney(c.b, *v)
	}
}

func (c *csvLine) optBool(v *bool) {
	c.sep()
	if v != nil {
		c.b = strconv.AppendBool(c.b, *v)
	}
}

// csvNeedsQuotes is encoding/csv's rule (Writer.fieldNeedsQuotes, comma ','): a comma, a
// quote, a line break, a leading space, or the field `\.`.
func csvNeedsQuotes(s string) bool {
	if s == "" {
		return false
	}
	if s == `\.` || strings.ContainsAny(s, ",\"\r\n") {
		return true
	}
	if s[0] < utf8.RuneSelf { // the common case, without decoding a rune
		return s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\v' || s[0] == '\f' || s[0] == '\r'
	}
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}

// textCells is a cellSink making each cell a string as the CSV has it (a null one empty, a
// text one spreadsheet-safe).
type textCells []string

func (c *textCells) text(s string) { *c = append(*c, report.SpreadsheetSafe(s)) }

func (c *textCells) optText(s *string) {
	if s == nil {
		*c = append(*c, "")
		return
	}
	c.text(*s)
}

func (c *textCells) num(v float64) { *c = append(*c, string(appendDecimal(nil, v))) }

func (c *textCells) optNum(v *float64) {
	if v == nil {
		*c = append(*c, "")
		return
	}
	c.num(*v)
}

func (c *textCells) money(v float64) { *c = append(*c, string(appendMoney(nil, v))) }

func (c *textCells) optMoney(v *float64) {
	if v == nil {
		*c = append(*c, "")
		return
	}
	c.money(*v)
}

func (c *textCells) optBool(v *bool) {
	if v == nil {
		*c = append(*c, "")
		return
	}
	*c = append(*c, strconv.FormatBool(*v))
}
