package nvmlsource

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every NVML call named in the source is in Calls, and every entry of Calls is one: a call
// missing from it would get its error series only on its first failure.
func TestCallsListsEveryCall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	re := regexp.MustCompile(`"(nvml\w+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			named[m[1]] = true
		}
	}
	calls := Calls()
	for call := range named {
		if !slices.Contains(calls, call) {
			t.Errorf("%s is called but not in Calls()", call)
		}
	}
	for _, call := range calls {
		if !named[call] {
			t.Errorf("Calls() lists %s, which the source never calls", call)
		}
	}
}

// The call and error series of every call exist at 0 before any call, and a GPU's read-failure
// series from its discovery.
func TestMetricsExistFromTheStart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	n := len(Calls())
	if got := testutil.CollectAndCount(m.errors); got != n {
		t.Errorf("%d nvml_errors_total series at start, want %d (one per call)", got, n)
	}
	if got := testutil.CollectAndCount(m.calls); got != n {
		t.Errorf("%d nvml_calls_total series at start, want %d", got, n)
	}
	lost := false
	src, err := Open(fakeLib([]nvml.Device{fakeGPU(0, &lost, false), fakeGPU(1, &lost, false)}, ""), Config{Node: "n", Metrics: m}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, uuid := range []string{"GPU-0", "GPU-1"} {
		if v := testutil.ToFloat64(m.gpuFailures.WithLabelValues(uuid)); v != 0 {
			t.Errorf("gpu_read_failures_total{uuid=%q} = %v, want 0", uuid, v)
		}
	}
	if got := testutil.CollectAndCount(m.gpuFailures); got != 2 {
		t.Errorf("%d gpu_read_failures_total series after discovery, want 2", got)
	}
}
