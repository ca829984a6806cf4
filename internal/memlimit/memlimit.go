// Package memlimit is a service's memory budget: --memory.limit, the Go runtime's soft memory
// limit (GOMEMLIMIT), set at start with a default, so that the garbage collector works harder
// before the process grows past it.
package memlimit

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/alecthomas/units"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// Default is the Go memory limit unless --memory.limit or GOMEMLIMIT says otherwise (docs/api.md,
// "Limits"): above what the attribution API's caps let callers make it hold, with room
// for a pass over 1000 instances.
const Default = "2GiB"

// Set applies --memory.limit (or GOMEMLIMIT, or the default) and logs it.
func Set(flag string, logger *slog.Logger) error {
	source := "--memory.limit"
	switch {
	case flag != "":
	case os.Getenv("GOMEMLIMIT") != "": // the runtime has applied it already
		logger.Info("memory limit", "bytes", debug.SetMemoryLimit(-1), "from", "GOMEMLIMIT")
		return nil
	default:
		flag, source = Default, "default"
	}
	limit, err := parseBytes(flag)
	if err != nil {
		return usage.Errorf("--memory.limit %q: %w", flag, err)
	}
	if limit == 0 {
		limit = math.MaxInt64 // the runtime's "no limit"
	}
	debug.SetMemoryLimit(limit)
	logger.Info("memory limit", "bytes", limit, "from", source)
	return nil
}

// parseBytes reads a size such as 2GiB, 512MiB or 1073741824.
func parseBytes(s string) (int64, error) {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	n, err := units.ParseStrictBytes(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("expected a size such as 2GiB, 512MiB or a number of bytes")
	}
	return n, nil
}
