package statement

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

//go:embed statement.html.tmpl
var pageText string

// page is parsed once: the template is part of the binary, an error in it is a bug.
var page = template.Must(template.New("statement").Funcs(template.FuncMap{
	"money":    money,
	"seconds":  func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 0, 64) },
	"hours":    func(d time.Duration) string { return strconv.FormatFloat(d.Hours(), 'f', 2, 64) },
	"dur":      dur,
	"durp":     func(d *time.Duration) string { return durp(d) },
	"pct":      func(f *float64) string { return pct(f) },
	"fraction": func(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) },
	"gib":      func(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', 2, 64) },
	"date":     func(t time.Time, loc *time.Location) string { return t.In(loc).Format(time.DateOnly) },
	"stamp":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}).Parse(pageText))

// money renders an amount with the report's 6 decimals, so that the page's totals read as
// the report's do.
func money(f float64) string { return report.Money(f) }

func dur(d time.Duration) string {
	if d >= time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}

func durp(d *time.Duration) string {
	if d == nil {
		return "–"
	}
	return dur(*d)
}

func pct(f *float64) string {
	if f == nil {
		return "–"
	}
	return strconv.FormatFloat(*f*100, 'f', 1, 64) + " %"
}

// The daily chart's geometry, in SVG user units: plain SVG drawn by the template, so the page
// needs no script and no library, and prints as vectors.
const (
	chartWidth, chartHeight = 720.0, 240.0
	chartLeft, chartBottom  = 64.0, 24.0
	chartTop                = 8.0
)

// bar is one day's stacked bar: used at the bottom, then waste, then overhead.
type bar struct {
	Day                   string
	X, W                  float64
	UsedY, UsedH          float64
	WasteY, WasteH        float64
	OverheadY, OverheadH  float64
	Used, Waste, Overhead string
	Label                 string // the day of the month, every few days
}

type tick struct {
	Y     float64
	Label string
}

type chart struct {
	Width, Height, Left, Base, Top float64
	Bars                           []bar
	Ticks                          []tick
}

func newChart(days []Day) chart {
	c := chart{Width: chartWidth, Height: chartHeight, Left: chartLeft, Base: chartHeight - chartBottom, Top: chartTop}
	top := 0.0
	for _, d := range days {
		top = math.Max(top, math.Max(d.Used(), 0)+d.WasteCost+d.OverheadCost)
	}
	scale := niceCeil(top)
	plot := c.Base - c.Top
	h := func(v float64) float64 {
		if scale == 0 || v <= 0 {
			return 0
		}
		return v / scale * plot
	}
	step := (c.Width - c.Left) / float64(max(len(days), 1))
	for i, d := range days {
		b := bar{Day: d.Start.Format(time.DateOnly), X: c.Left + float64(i)*step + step*0.1, W: step * 0.8,
			Used: money(d.Used()), Waste: money(d.WasteCost), Overhead: money(d.OverheadCost)}
		b.UsedH, b.WasteH, b.OverheadH = h(d.Used()), h(d.WasteCost), h(d.OverheadCost)
		b.UsedY = c.Base - b.UsedH
		b.WasteY = b.UsedY - b.WasteH
		b.OverheadY = b.WasteY - b.OverheadH
		if day := d.Start.Day(); day == 1 || day%5 == 0 {
			b.Label = strconv.Itoa(day)
		}
		c.Bars = append(c.Bars, b)
	}
	for i := 0; i <= 4; i++ {
		v := scale * float64(i) / 4
		c.Ticks = append(c.Ticks, tick{Y: c.Base - h(v), Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	if scale == 0 {
		c.Ticks = []tick{{Y: c.Base, Label: "0"}}
	}
	return c
}

// niceCeil is the smallest 1, 2 or 5 × 10^k at or above v (the chart's top), 0 for 0.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

type view struct {
	*Statement
	Chart chart
}

// Render writes the statement as one HTML page: inline CSS and SVG, no script, nothing it
// fetches. It is rendered whole before anything is written, so an error leaves w untouched.
func Render(w io.Writer, st *Statement) error {
	var buf bytes.Buffer
	if err := page.Execute(&buf, view{Statement: st, Chart: newChart(st.Days)}); err != nil {
		return fmt.Errorf("render the statement of %s for %s: %w", st.Tenant, st.Period, err)
	}
	if _, err := buf.WriteTo(w); err != nil {
		return fmt.Errorf("write the statement of %s for %s: %w", st.Tenant, st.Period, err)
	}
	return nil
}
