package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// BenchmarkFOCUSAPI streams February 2026's FOCUS export (28 days × SLICEMETER_BENCH_INSTANCES
// allocations an hour, default 100, from a Reporter that makes them up, so that only the
// API's side is measured) through GET /api/v1/report?format=focus, CSV and Parquet, and
// reports the bytes received and the process's peak RSS after each: streamed, it stays far
// below the file's size.
//
//	SLICEMETER_BENCH_INSTANCES=1000 go test -run '^$' -bench FOCUSAPI -benchtime 1x ./attribution/api/
func BenchmarkFOCUSAPI(b *testing.B) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("SLICEMETER_BENCH_INSTANCES")); err == nil && v > 0 {
		n = v
	}
	reporter := func(_ context.Context, q ReportQuery) (report.Report, error) {
		rep := report.Report{WindowStart: q.From, WindowEnd: q.To, Currency: "USD"}
		eff := 0.8
		for i := range n {
			rep.Allocations = append(rep.Allocations, report.AllocationRow{Tenant: fmt.Sprintf("tenant-%03d", i%50), AllocationID: fmt.Sprintf("alloc-%05d", i),
				Tier: "pro", WindowStart: q.From, WindowEnd: q.To, Node: fmt.Sprintf("node-%03d", i/7), Instance: fmt.Sprintf("gpu%d/mig%d", i%8, i%7),
				Kind: "mig", Model: "A100-SXM4-40GB", Profile: "1g.5gb", Fraction: 1. / 7, Allocated: q.To.Sub(q.From), Measured: q.To.Sub(q.From),
				Cost: 0.228571, ListCost: 0.228571, WasteCost: 0.04, Efficiency: &eff, Currency: "USD"})
		}
		return rep, nil
	}
	s := &Server{Store: &memStore{}, Auth: AllowAll{}, Report: reporter}
	srv := httptest.NewServer(http.HandlerFunc(s.getReport))
	defer srv.Close()
	from, to := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, enc := range []string{"csv", "parquet"} {
		b.Run(enc, func(b *testing.B) {
			for range b.N {
				resp, err := http.Get(srv.URL + "/api/v1/report?format=focus&encoding=" + enc + "&from=" + from.Format(time.RFC3339) + "&to=" + to.Format(time.RFC3339))
				if err != nil {
					b.Fatal(err)
				}
				size, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				b.ReportMetric(float64(size)/1e6, "MB")
			}
			b.ReportMetric(peakRSS(b), "peak-RSS-MiB")
		})
	}
}

// peakRSS is the process's peak resident set (VmHWM), in MiB.
func peakRSS(b *testing.B) float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
