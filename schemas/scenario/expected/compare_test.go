package expected

import "testing"

func TestCompare(t *testing.T) {
	want := [][]string{{"tenant", "cost", "waste_cost", "jitter_p99_ms", "cold_start_breaches"}, {"a", "1.000000", "0.000000", "4.060", "1"}}
	tests := []struct {
		got  []string
		ok   bool
		name string
	}{
		{[]string{"a", "1.000000", "0.000000", "4.060", "1"}, true, "equal"},
		{[]string{"a", "1.000001", "0.000000", "4.100", "1"}, true, "within"},
		{[]string{"a", "1.000000", "0.000090", "4.060", "1"}, true, "waste within 0.01 % of cost"},
		{[]string{"a", "1.000000", "0.000200", "4.060", "1"}, false, "waste off"},
		{[]string{"a", "1.000003", "0.000000", "4.060", "1"}, false, "money off"},
		{[]string{"a", "1.000000", "0.000000", "4.200", "1"}, false, "jitter off"},
		{[]string{"a", "1.000000", "0.000000", "4.060", "2"}, false, "breaches off"},
		{[]string{"a", "1.000000", "0.000000", "", "1"}, false, "empty vs value"},
	}
	for _, tt := range tests {
		d := Compare([][]string{want[0], tt.got}, want, 0.1)
		if (len(d) == 0) != tt.ok {
			t.Errorf("%s: diffs %v, ok want %v", tt.name, d, tt.ok)
		}
	}
}
