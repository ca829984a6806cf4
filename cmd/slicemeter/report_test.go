package main

import (
	"net/url"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/request"
)

// Every parameter the request's parsing can refuse is named by its flag: a bad --step says
// "--step: …", as before the command and the API shared the parsing.
func TestReportNamesBadParametersByFlag(t *testing.T) {
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for query, want := range map[string]string{
		"format=xml":               "--format: ",
		"by=node":                  "--by: ",
		"source=x":                 "--from-minutes: ",
		"step=7x":                  `--step: step "7x": `,
		"format=focus&encoding=xz": "--focus.file-format: ",
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
