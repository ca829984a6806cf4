package billing

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

func TestPresent(t *testing.T) {
	const period = time.Hour
	m := func(minutes float64) int64 { return at(time.Duration(minutes * float64(time.Minute))) }
	sample := func(minutes ...float64) []Span {
		var out []Span
		for _, x := range minutes {
			out = append(out, Span{m(x), m(x)})
		}
		return out
	}
	month := Interval{m(-10 * 24 * 60), m(20 * 24 * 60)}
	for _, tt := range []struct {
		name   string
		spans  []Span
		window Interval
		want   []Interval
	}{
		{"no sample", nil, month, nil},
		{"one sample: a period of capacity", sample(10), month, []Interval{{m(10), m(70)}}},
		{"joined a minute ago: from its first sample to the horizon", sample(0, 0.5, 1), Interval{month.Start, m(1.5)}, []Interval{{m(0), m(1.5)}}},
		{"48 s in a month", []Span{{m(0), m(0.8)}}, month, []Interval{{m(0), m(60.8)}}},
		{"an outage shorter than the period stays capacity", sample(0, 59, 100), month, []Interval{{m(0), m(160)}}},
		{"an outage of exactly the period stays capacity", sample(0, 60), month, []Interval{{m(0), m(120)}}},
		{"an outage longer than the period is not, beyond the period", sample(0, 90, 91), month, []Interval{{m(0), m(60)}, {m(90), m(151)}}},
		{"left: capacity until its last sample plus the period", sample(0, 1, 2), month, []Interval{{m(0), m(62)}}},
		{"sampled before the window: the rest of its period", sample(-30), Interval{m(0), m(120)}, []Interval{{m(0), m(30)}}},
		{"sampled a period before the window: nothing", sample(-60), Interval{m(0), m(120)}, nil},
		{"sampled after the window: nothing", sample(120), Interval{m(0), m(120)}, nil},
		{"clipped at both ends", sample(-30, 20, 100), Interval{m(0), m(110)}, []Interval{{m(0), m(80)}, {m(100), m(110)}}},
		{"overlapping spans (a bucket read twice)", []Span{{m(0), m(10)}, {m(5), m(8)}, {m(10), m(20)}}, month, []Interval{{m(0), m(80)}}},
		{"the ns at the edge", []Span{{m(0) + 1, m(1)}}, Interval{m(0), m(61) - 1}, []Interval{{m(0) + 1, m(61) - 1}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Present(tt.spans, period, tt.window)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Present = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPresentAdditive: the capacity of adjacent windows sums to that of their union, whatever
// the cut (the stored minutes sum to the window's report).
func TestPresentAdditive(t *testing.T) {
	const period = time.Hour
	spans := []Span{{at(250 * time.Millisecond), at(29 * time.Minute)}, {at(61 * time.Minute), at(62 * time.Minute)},
		{at(200 * time.Minute), at(200*time.Minute + 7)}}
	whole := Interval{at(0), at(5 * time.Hour)}
	want := Total(Present(spans, period, whole))
	for _, step := range []time.Duration{time.Minute, 7 * time.Second, 13 * time.Minute, time.Hour} {
		var sum time.Duration
		for s := whole.Start; s < whole.End; s += int64(step) {
			sum += Total(Present(spans, period, Interval{s, min(s+int64(step), whole.End)}))
		}
		if sum != want {
			t.Errorf("windows of %s sum to %s, the whole window %s", step, sum, want)
		}
	}
	if w := 122*time.Minute - 250*time.Millisecond + time.Hour + 7; want != w {
		t.Errorf("whole window %s, want %s", want, w)
	}
}

func TestClipped(t *testing.T) {
	ivs := []Interval{{at(0), at(10)}, {at(20), at(30)}, {at(40), at(50)}}
	for _, tt := range []struct {
		window Interval
		want   []Interval
	}{
		{Interval{at(0), at(50)}, ivs},
		{Interval{at(5), at(45)}, []Interval{{at(5), at(10)}, {at(20), at(30)}, {at(40), at(45)}}},
		{Interval{at(10), at(20)}, nil},
		{Interval{at(25), at(26)}, []Interval{{at(25), at(26)}}},
	} {
		if got := Clipped(ivs, tt.window); !slices.Equal(got, tt.want) {
			t.Errorf("Clipped(%v) = %v, want %v", tt.window, got, tt.want)
		}
	}
}

// TestCapacityListCost: each interval of capacity is priced at the prices in force in it, and
// only within the window.
func TestCapacityListCost(t *testing.T) {
	change := UTC(at(2 * time.Hour))
	book := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100": 1.60, "H100": 2.40},
		Changes: []pricebook.Change{{Effective: change, Prices: map[string]float64{"A100": 3.20}}}}
	f := NewFleet()
	f.GPUs[GPU{"n", "a", "A100"}] = []Interval{{at(0), at(30 * time.Minute)}, {at(90 * time.Minute), at(150 * time.Minute)}}
	f.GPUs[GPU{"n", "h", "H100"}] = []Interval{{at(0), at(4 * time.Hour)}}
	window := Interval{at(0), at(3 * time.Hour)}
	got, err := CapacityListCost(f, window, book)
	want := 1.60*0.5 + 1.60*0.5 + 3.20*0.5 + 2.40*3
	if err != nil || math.Abs(got-want) > 1e-12 {
		t.Errorf("capacity %.12f, %v; want %.12f", got, err, want)
	}
	f.GPUs[GPU{"n", "x", "X9"}] = []Interval{{at(0), at(time.Minute)}}
	if _, err := CapacityListCost(f, window, book); err == nil || !strings.Contains(err.Error(), "X9") {
		t.Errorf("a model without a price: %v", err)
	}
}
