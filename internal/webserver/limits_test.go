package webserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
)

// lockedBuffer is a log sink the server writes to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listening = regexp.MustCompile(`msg="Listening on" address=(\S+)`)

// serve starts Serve on a port the kernel picks, with limits and a POST /upload route that
// reads its body, and returns the address.
func serve(t *testing.T, limits Limits) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	addrs, systemd, config := []string{"127.0.0.1:0"}, false, ""
	errc := Serve(ctx, Options{
		Flags:    &Flags{FlagConfig: &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &config}, Limits: limits},
		Registry: prometheus.NewRegistry(),
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Routes: []func(*http.ServeMux){func(mux *http.ServeMux) {
			mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.Copy(io.Discard, r.Body); err != nil {
					http.Error(w, err.Error(), http.StatusRequestTimeout)
				}
			})
		}},
	})
	t.Cleanup(func() {
		cancel()
		for range errc { // until stopped
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("the server did not log its address:\n%s", logs.String())
	return ""
}

// slowBody opens a connection from local (an IP) and sends a POST whose body comes one byte
// every interval until ctx ends. The returned channel is closed when the server closes the
// connection.
func slowBody(ctx context.Context, t *testing.T, local, addr string, interval time.Duration) (<-chan struct{}, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	closed := make(chan struct{})
	go func() { // the server's close ends this read
		defer close(closed)
		_, _ = io.Copy(io.Discard, c)
	}()
	go func() {
		defer c.Close()
		if _, err := fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"); err != nil {
			return
		}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-closed:
				return
			case <-tick.C:
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	return closed, nil
}

// TestSlowBodiesDoNotBlockHealthz holds 200 connections from one client (127.0.0.2) that send
// a body one byte every 2 s. With a cap of 100 connections in all and 50 per client, the
// client gets 50 and the rest are closed at once, so /healthz from another client (127.0.0.1)
// still answers; without the per-client cap the 100 slots would all be the slow client's.
func TestSlowBodiesDoNotBlockHealthz(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxConnections, limits.MaxClientConnections = 100, 50
	addr := serve(t, limits)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const attackers = 200
	var closed []<-chan struct{}
	for range attackers {
		c, err := slowBody(ctx, t, "127.0.0.2", addr, 2*time.Second)
		if err != nil {
			t.Skipf("cannot connect from 127.0.0.2 (no loopback /8 here?): %v", err)
		}
		closed = append(closed, c)
	}
	// Those over the per-client cap are closed at once; wait for them (bounded).
	deadline := time.After(30 * time.Second)
	refused := 0
	for _, c := range closed {
		select {
		case <-c:
			refused++
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
		}
	}
	if refused < attackers-limits.MaxClientConnections {
		t.Errorf("%d of %d slow connections from one client closed, want at least %d (the per-client cap is %d)",
			refused, attackers, attackers-limits.MaxClientConnections, limits.MaxClientConnections)
	}

	client := &http.Client{Timeout: time.Second}
	for i := range 3 {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("/healthz #%d while %d slow bodies are held: %v", i+1, attackers-refused, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/healthz #%d: %s", i+1, resp.Status)
		}
		time.Sleep(time.Second)
	}
}

// TestReadTimeoutCutsSlowBody checks that a body slower than --web.read-timeout is cut.
func TestReadTimeoutCutsSlowBody(t *testing.T) {
	limits := DefaultLimits()
	limits.ReadTimeout = time.Second
	addr := serve(t, limits)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	closed, err := slowBody(ctx, t, "127.0.0.1", addr, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // a bound on a hang, not a latency
		t.Fatal("a body sent one byte every 200ms was not cut by a 1s read timeout after 30s")
	}
}

// The per-client cap gives a slot back when a connection closes, once however often it closes.
func TestClientLimitListenerReleases(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &clientLimitListener{Listener: inner, max: 1, open: map[string]int{}}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Error(err)
				}
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := dial()
	defer first.Close()
	a := <-accepted
	second := dial() // over the cap: closed by the server
	if _, err := second.Read(make([]byte, 1)); err == nil {
		t.Error("a second connection from the client was served")
	}
	second.Close()
	a.Close()
	a.Close()
	third := dial()
	defer third.Close()
	b := <-accepted
	defer b.Close()
	ln.mu.Lock()
	open := ln.open["127.0.0.1"]
	ln.mu.Unlock()
	if open != 1 {
		t.Errorf("open connections of the client: %d, want 1", open)
	}
}

func TestLimitsCheck(t *testing.T) {
	for _, tt := range []struct {
		l    Limits
		want string
	}{
		{Limits{ReadTimeout: -time.Second}, "--web.read-timeout"},
		{Limits{MaxClientConnections: -1}, "--web.max-client-connections"},
		{DefaultLimits(), ""},
	} {
		err := tt.l.check()
		if got := fmt.Sprint(err); (tt.want == "") != (err == nil) || tt.want != "" && !regexp.MustCompile(regexp.QuoteMeta(tt.want)).MatchString(got) {
			t.Errorf("check(%+v) = %v, want %q", tt.l, err, tt.want)
		}
	}
}
