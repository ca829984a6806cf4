package chquery

import "testing"

// TestPack: packed arrays join hex strings and decimal numbers with ',', which
// neither contains; an empty string is an empty element.
func TestPack(t *testing.T) {
	if got, want := PackStrings([]string{"node-a", "", "a,b'\\"}), "6e6f64652d61,,612c62275c"; got != want {
		t.Errorf("PackStrings: %q, want %q", got, want)
	}
	if got, want := PackInts([]int64{-1, 0, 1772409600000000000}), "-1,0,1772409600000000000"; got != want {
		t.Errorf("PackInts: %q, want %q", got, want)
	}
}
