package e2e

import (
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestExporterFullSpoolLogsOnce: an hour of a scenario sampled as fast as it goes into a 64 KiB
// spool while Kafka is unreachable drops ~180,000 samples in a few seconds; the log says so in
// two lines (the first drop, and at exit how many more there were), not one per batch (6,814
// WARN lines in 4 s before).
//
//	go test -count=1 -run TestExporterFullSpoolLogsOnce ./e2e/
func TestExporterFullSpoolLogsOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := apptest.Run(t, ctx, "exporter", "--source", "sim", "--scenario", filepath.Join(scenarios, "mig-basic.yaml"), "--sim.fast",
		"--kafka.brokers", nowhere, "--spool.dir", t.TempDir(), "--spool.max-bytes", "65536", "--kafka.drain-timeout", "1s",
		"--web.listen-address", "127.0.0.1:0")
	if r.Code != 1 { // samples left undelivered
		t.Fatalf("exit %d, want 1\n%s", r.Code, apptest.Tail(r.Stderr, 10))
	}
	lines := regexp.MustCompile(`(?m)^.*samples dropped from the Kafka spool.*$`).FindAllString(r.Stderr, -1)
	if len(lines) != 2 {
		t.Fatalf("%d lines about dropped samples, want 2 (the first, then the count at exit)\n%s", len(lines), apptest.Tail(r.Stderr, 20))
	}
	m := regexp.MustCompile(`not_logged_since_last=(\d+) .*latest.samples_dropped_so_far=(\d+)`).FindStringSubmatch(lines[1])
	if m == nil {
		t.Fatalf("the last line does not say how many were not logged and dropped: %s", lines[1])
	}
	held, _ := strconv.Atoi(m[1])
	dropped, _ := strconv.Atoi(m[2])
	if held < 100 || dropped < 10_000 {
		t.Errorf("%d drops held back, %d samples dropped: the spool did not overflow as the test needs", held, dropped)
	}
	if n := strings.Count(r.Stderr, "level=WARN"); n > 10 {
		t.Errorf("%d WARN lines in a %s run, want a handful\n%s", n, r.Took.Round(time.Millisecond), apptest.Tail(r.Stderr, 20))
	}
}
