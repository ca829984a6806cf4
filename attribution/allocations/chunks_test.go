package allocations

import (
	"fmt"
	"testing"
)

func TestChunks(t *testing.T) {
	tests := []struct {
		name     string
		a, b     []string
		maxBytes int
		want     string
	}{
		{"none", nil, nil, 10, "[]"},
		{"one fits", []string{"ab", "cd"}, nil, 12, "[{0 2}]"},
		{"three", []string{"ab", "cd", "ef", "gh", "ij"}, nil, 12, "[{0 2} {2 4} {4 5}]"},
		{"pairs count both", []string{"a", "b", "c"}, []string{"x", "y", "z"}, 10, "[{0 1} {1 2} {2 3}]"},
		{"longer than the limit alone", []string{"a", "very long name", "b"}, nil, 6, "[{0 1} {1 2} {2 3}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprint(chunks(tt.a, tt.b, tt.maxBytes)); got != tt.want {
				t.Errorf("chunks = %s, want %s", got, tt.want)
			}
		})
	}
}
