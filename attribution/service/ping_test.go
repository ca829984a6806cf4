package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/internal/lograte"
)

// TestPingerReadiness: /readyz lacks ClickHouse from the first failed ping to the next one
// that answers, and the log says so once each way.
func TestPingerReadiness(t *testing.T) {
	t.Parallel()
	var down error
	var log bytes.Buffer
	p := &pinger{ping: func(context.Context) error { return down }, logger: slog.New(slog.NewTextHandler(&log, nil))}
	for i, tc := range []struct {
		err     error
		missing string
	}{
		{nil, ""},
		{errors.New("dial tcp 127.0.0.1:9000: connect: connection refused"), "clickhouse: dial tcp 127.0.0.1:9000"},
		{errors.New("dial tcp 127.0.0.1:9000: i/o timeout"), "clickhouse: dial tcp 127.0.0.1:9000: i/o timeout"},
		{nil, ""},
	} {
		down = tc.err
		p.check(context.Background())
		got := strings.Join(p.missing(), "\n")
		if tc.missing == "" && got != "" || !strings.Contains(got, tc.missing) {
			t.Errorf("ping %d (%v): missing %q, want %q", i, tc.err, got, tc.missing)
		}
	}
	if n, m := strings.Count(log.String(), "unreachable"), strings.Count(log.String(), "answers again"); n != 1 || m != 1 {
		t.Errorf("%d lines of unreachable, %d of answers again, want 1 each:\n%s", n, m, log.String())
	}
}

// TestLogNotesSummed: a report with 100,000 notes (one per refused allocation) is logged as
// one line of a few KB with their count and the first few, not a line of megabytes.
func TestLogNotesSummed(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	s := &service{logger: logger, logs: lograte.New(logger, time.Minute)}
	rep := report.Report{WindowStart: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), WindowEnd: time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC)}
	for i := range 100_000 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("allocation %q of tenant \"acme\" overlaps allocation \"b%d\" on node-%d/gpu0", fmt.Sprint("a", i), i, i))
	}
	s.logNotes(context.Background(), rep)
	line := log.String()
	t.Logf("%d notes: one line of %d bytes", len(rep.Notes), len(line))
	if len(line) > 2<<10 || !strings.Contains(line, `"count":100000`) || !strings.Contains(line, `\"a4\"`) || strings.Contains(line, `\"a5\"`) {
		t.Errorf("a line of %d bytes: %.500s; want under 2 KB with the count and the first 5 notes", len(line), line)
	}
}
