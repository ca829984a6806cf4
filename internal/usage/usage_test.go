package usage

import (
	"errors"
	"fmt"
	"testing"
)

func TestIs(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", base, false},
		{"errorf", Errorf("--flag %q: bad", "x"), true},
		{"wrapped", fmt.Errorf("starting: %w", Wrap(base)), true},
		{"wrap nil", Wrap(nil), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Is(tc.err); got != tc.want {
				t.Errorf("Is(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	if err := Wrap(base); !errors.Is(err, base) {
		t.Errorf("Wrap loses the cause: %v", err)
	}
}
