package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestAttributionLimits starts the real attribution service with small caps: 200 connections
// from one client (127.0.0.2) posting allocations one byte every 2 s do not keep /healthz from
// answering another client, and a report over --api.max-report-windows is a 400 naming it.
func TestAttributionLimits(t *testing.T) {
	// In turn, not in parallel: /healthz must answer within its client's 1 s timeout while
	// slow bodies are sent, which another test's load on the same cores would make.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := localtest.Database(t, localtest.DatabaseOptions{})
	p := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", db.DSN, "--scenario", filepath.Join(scenarios, "mig-basic.yaml"),
		"--web.max-client-connections", "50", "--web.max-connections", "100", "--api.max-report-windows", "5")

	resp, err := http.Get(p.URL("/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T10:00:00Z&step=1h"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "10 windows") || !strings.Contains(string(b), "--api.max-report-windows") {
		t.Errorf("report of 10 windows over a limit of 5: %d %s", resp.StatusCode, b)
	}

	const slow = 200
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for range slow {
		c, err := d.DialContext(ctx, "tcp", p.Addr())
		if err != nil {
			t.Skipf("cannot connect from 127.0.0.2: %v", err)
		}
		defer c.Close()
		go func() {
			if _, err := fmt.Fprintf(c, "POST /api/v1/allocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"); err != nil {
				return
			}
			for ctx.Err() == nil {
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(2 * time.Second)
			}
		}()
	}
	time.Sleep(2 * time.Second) // the slow bodies are under way
	client := &http.Client{Timeout: time.Second}
	for i := range 3 {
		resp, err := client.Get(p.URL("/healthz"))
		if err != nil {
			t.Fatalf("/healthz #%d while %d slow bodies are sent: %v\n%s", i+1, slow, err, p.LogTail(20))
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/healthz #%d: %s", i+1, resp.Status)
		}
		time.Sleep(time.Second)
	}
}
