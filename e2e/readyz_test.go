package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestAttributionReadyzFollowsClickHouse: the attribution service reaches ClickHouse through a
// proxy the test can cut. While it is cut, /readyz answers 503 naming ClickHouse (a load
// balancer stops sending callers to a replica that can answer none of them), and a report is
// a 5xx whose body gives an error id, not the address dialled (the log has it); once it is
// back, 200 again, without a restart.
//
//	go test -count=1 -run TestAttributionReadyzFollowsClickHouse ./e2e/
func TestAttributionReadyzFollowsClickHouse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	apptest.Migrate(t, ctx, db.DSN)
	proxy := newCuttableProxy(t, db.Server.Addr())
	svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", "clickhouse://"+proxy.addr()+"/"+db.Name,
		"--scenario", filepath.Join(scenarios, "mig-basic.yaml"), "--attribution.interval", "1s")
	readyz := func() (int, string) {
		resp, err := http.Get(svc.URL("/readyz"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what string, ok func(int, string) bool) {
		t.Helper()
		var code int
		var body string
		for until := time.Now().Add(60 * time.Second); time.Now().Before(until); time.Sleep(250 * time.Millisecond) {
			if code, body = readyz(); ok(code, body) {
				return
			}
		}
		t.Fatalf("/readyz never %s within 60 s: %d %q\n%s", what, code, body, svc.LogTail(20))
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz with ClickHouse up: %d %q", code, body)
	}
	// Ready means a pass was done: the log says so (it said nothing after "Listening on").
	if !svc.LogContains("attribution: first pass done") {
		t.Errorf("no line says the first pass was done:\n%s", svc.LogTail(20))
	}
	proxy.cut()
	cutAt := time.Now()
	waitFor("said ClickHouse is missing", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "clickhouse")
	})
	t.Logf("/readyz not ready %v after ClickHouse was cut", time.Since(cutAt).Round(100*time.Millisecond))
	// A report now fails: the caller reads an error id, not the address the service dialled.
	resp, err := http.Get(svc.URL("/api/v1/report?from=2026-01-05T00:00:00Z&to=2026-01-05T01:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var problem struct {
		Error   string `json:"error"`
		ErrorID string `json:"error_id"`
	}
	_ = json.Unmarshal(b, &problem)
	if resp.StatusCode < 500 || problem.ErrorID == "" || strings.Contains(string(b), "127.0.0.1") || strings.Contains(string(b), proxy.addr()) {
		t.Errorf("a report while ClickHouse is cut: %d %s; want a 5xx with an error_id and no address", resp.StatusCode, b)
	}
	if !svc.LogContains("error_id=" + problem.ErrorID) {
		t.Errorf("the log has no line with error_id %s:\n%s", problem.ErrorID, svc.LogTail(20))
	}
	proxy.restore()
	waitFor("was ready again", func(code int, _ string) bool { return code == http.StatusOK })
}

// cuttableProxy forwards TCP connections to a server until cut: then it closes the open ones
// and every new one at once, until restored.
type cuttableProxy struct {
	ln    net.Listener
	down  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func newCuttableProxy(t *testing.T, target string) *cuttableProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.closeAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.down.Load() {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cuttableProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttableProxy) cut() {
	p.down.Store(true)
	p.closeAll()
}

func (p *cuttableProxy) restore() { p.down.Store(false) }

func (p *cuttableProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
