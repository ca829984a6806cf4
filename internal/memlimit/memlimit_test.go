package memlimit

import (
	"log/slog"
	"math"
	"runtime/debug"
	"testing"
)

// TestSet: the flag sets the runtime's limit (0: none), the default applies without it or
// GOMEMLIMIT, and a malformed size is a usage error naming the flag and the value.
func TestSet(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	logger := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		flag string
		want int64
	}{{"512MiB", 512 << 20}, {"1GB", 1e9}, {"1073741824", 1 << 30}, {"0", math.MaxInt64}, {"", 2 << 30}} {
		if err := Set(tt.flag, logger); err != nil {
			t.Fatalf("--memory.limit %q: %v", tt.flag, err)
		}
		if got := debug.SetMemoryLimit(-1); got != tt.want {
			t.Errorf("--memory.limit %q: limit %d, want %d", tt.flag, got, tt.want)
		}
	}
	if err := Set("2 gigs", logger); err == nil || err.Error() != `--memory.limit "2 gigs": expected a size such as 2GiB, 512MiB or a number of bytes` {
		t.Errorf("a malformed size: %v", err)
	}
}
