package apptest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// pollInterval is how often WaitUntil looks again: short next to what the tests wait for
// (flushes, refreshes, passes of a second or more), long enough not to load the machine.
const pollInterval = 100 * time.Millisecond

// WaitUntil polls cond until it holds; it fails t, naming what it waited for, if timeout
// passes first. A test waits for a condition this way instead of sleeping for a time that
// is too long on a quiet machine and may be too short on a loaded one.
func WaitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(pollInterval) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
	}
}

// Metric is the value of one sample on the process's /metrics: name is the sample as the
// exposition writes it, labels included (`slicemeter_exporter_kafka_up`,
// `x_total{reason="y"}`). ok is false if /metrics did not answer 200 or has no such sample.
func (p *Process) Metric(name string) (v float64, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL("/metrics"), nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	return metricValue(string(body), name)
}

// metricValue finds the sample name in an exposition.
func metricValue(exposition, name string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(exposition)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// WaitMetric waits until the process's metric name (as for Metric) is at least min; it fails t
// if timeout passes first, quoting the last value and the log's tail.
func (p *Process) WaitMetric(t testing.TB, timeout time.Duration, name string, min float64) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); ; time.Sleep(pollInterval) {
		v, ok := p.Metric(name)
		if ok && v >= min {
			return
		}
		last = "absent"
		if ok {
			last = fmt.Sprint(v)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s >= %v on slicemeter %s's /metrics; last: %s\n%s", timeout, name, min, p.name, last, p.LogTail(20))
		}
	}
}
