//go:build !exporter_only

package main

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/request"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// Every parameter the request's parsing can refuse is named by its flag: a bad --step says
// "--step: …", as before the command and the API shared the parsing.
func TestReportNamesBadParametersByFlag(t *testing.T) {
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for query, want := range map[string]string{
		"format=xml":                     "--format: ",
		"by=node":                        "--by: ",
		"source=x":                       "--from-minutes: ",
		"step=7x":                        `--step: step "7x": `,
		"format=focus&encoding=xz":       "--focus.file-format: ",
		"format=focus&focus_version=1.4": "--focus.version: ",
		"format=focus-metadata&focus_version=1.1": "--focus.version: ",
	} {
		q, _ := url.ParseQuery(query)
		_, err := request.Parse(q, from, from.Add(time.Hour), time.UTC)
		if err == nil {
			t.Errorf("%s: no error", query)
			continue
		}
		if got := flagError(err).Error(); len(got) < len(want) || got[:len(want)] != want {
			t.Errorf("%s: %q, want it to start with %q", query, got, want)
		}
	}
}

// Through the binary, on a real ClickHouse: --from and --to take a date (midnight UTC), and a
// window that ends after now stops there with a window_end in whole seconds like its
// window_start (it carried the clock's nanoseconds). The line items take the same horizon.
func TestReportDatesAndWindowEndInSeconds(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{})
	scenario := "../../schemas/scenario/testdata/mig-basic.yaml"
	seconds := regexp.MustCompile(`^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
	for _, args := range [][]string{
		{"report", "--from", "2026-01-05", "--to", "2106-01-01"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append(args, "--scenario", scenario, "--clickhouse.dsn", db.DSN), &stdout, &stderr); code != exitOK {
			t.Errorf("slicemeter %v: exit %d\n%s", args, code, stderr.String())
			continue
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		header := strings.Split(lines[0], ",")
		start, end := -1, -1
		for i, c := range header {
			switch c {
			case "window_start":
				start = i
			case "window_end":
				end = i
			}
		}
		if len(lines) < 2 || start < 0 || end < 0 {
			t.Errorf("slicemeter %v: want a header with window_start, window_end and a row:\n%s", args, stdout.String())
			continue
		}
		for _, line := range lines[1:] {
			cells := strings.Split(line, ",")
			if cells[start] != "2026-01-05T00:00:00Z" || !seconds.MatchString(cells[end]) {
				t.Errorf("slicemeter %v: row %q: want window_start 2026-01-05T00:00:00Z and window_end in whole seconds", args, line)
			}
			if e, err := time.Parse(time.RFC3339, cells[end]); err != nil || e.After(time.Now()) {
				t.Errorf("slicemeter %v: window_end %s after now", args, cells[end])
			}
		}
	}
}
