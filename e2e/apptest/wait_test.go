package apptest

import (
	"testing"
	"time"
)

func TestMetricValue(t *testing.T) {
	t.Parallel()
	text := "# HELP x_total X.\n# TYPE x_total counter\nx_total 3\nx_total{reason=\"a\"} 2.5\nx_total_other 9\n"
	for _, tc := range []struct {
		name string
		want float64
		ok   bool
	}{{"x_total", 3, true}, {`x_total{reason="a"}`, 2.5, true}, {"x_tot", 0, false}, {`x_total{reason="b"}`, 0, false}} {
		if v, ok := metricValue(text, tc.name); v != tc.want || ok != tc.ok {
			t.Errorf("metricValue(%s) = %v, %v; want %v, %v", tc.name, v, ok, tc.want, tc.ok)
		}
	}
}

func TestWaitUntil(t *testing.T) {
	t.Parallel()
	n := 0
	WaitUntil(t, 5*time.Second, "the third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("looked %d times, want 3", n)
	}
}
