package webserver

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/netutil"
)

// Flags are what a process's web flags say (cmd/slicemeter registers them): exporter-toolkit's
// (listen addresses, web config file) and the limits that keep it answering under abuse.
type Flags struct {
	*web.FlagConfig
	Limits Limits
}

// Serves reports whether f names a listen address: without one, Serve serves nothing.
func (f *Flags) Serves() bool {
	return f != nil && f.FlagConfig != nil && f.WebListenAddresses != nil && len(*f.WebListenAddresses) > 0 && (*f.WebListenAddresses)[0] != ""
}

// Limits bound what clients can hold of the server. Zero durations and counts mean no limit.
type Limits struct {
	ReadHeaderTimeout time.Duration // to read a request's headers
	ReadTimeout       time.Duration // to read a whole request, body included (a slow body is cut)
	WriteTimeout      time.Duration // from the end of the headers to the end of the response
	IdleTimeout       time.Duration // a keep-alive connection between requests
	MaxConnections    int           // open connections in all; more wait to be accepted
	// MaxClientConnections bounds the open connections from one client IP; more are closed at
	// once, so that one client cannot take every connection (and /healthz's with them).
	MaxClientConnections int
}

// DefaultLimits are the flags' defaults. A report of the attribution API may take a minute
// (the write timeout), a POST of 100,000 allocations is 23 MiB (the read timeout), and the
// connection caps stay well below a usual 20,000 file descriptors.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout:    10 * time.Second,
		ReadTimeout:          time.Minute,
		WriteTimeout:         5 * time.Minute,
		IdleTimeout:          2 * time.Minute,
		MaxConnections:       4096,
		MaxClientConnections: 512,
	}
}

// check refuses negative limits.
func (l Limits) check() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--web.read-header-timeout", l.ReadHeaderTimeout}, {"--web.read-timeout", l.ReadTimeout}, {"--web.write-timeout", l.WriteTimeout}, {"--web.idle-timeout", l.IdleTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("%s %s: expected a duration ≥ 0", d.flag, d.v)
		}
	}
	if l.MaxConnections < 0 || l.MaxClientConnections < 0 {
		return fmt.Errorf("--web.max-connections %d, --web.max-client-connections %d: expected counts ≥ 0", l.MaxConnections, l.MaxClientConnections)
	}
	return nil
}

// listen opens the TCP listeners of addresses, capped as l says.
func (l Limits) listen(addresses []string) ([]net.Listener, error) {
	var listeners []net.Listener
	for _, address := range addresses {
		ln, err := net.Listen("tcp", address)
		if err != nil {
			for _, o := range listeners {
				o.Close()
			}
			return nil, err
		}
		listeners = append(listeners, l.wrap(ln))
	}
	return listeners, nil
}

// wrap caps ln's connections: per client first (refused at once), then in all (waiting).
func (l Limits) wrap(ln net.Listener) net.Listener {
	if l.MaxClientConnections > 0 {
		ln = &clientLimitListener{Listener: ln, max: l.MaxClientConnections, open: map[string]int{}}
	}
	if l.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, l.MaxConnections)
	}
	return ln
}

// clientLimitListener closes at once a connection from a client IP that already has max open.
type clientLimitListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (l *clientLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		l.mu.Lock()
		ok := l.open[ip] < l.max
		if ok {
			l.open[ip]++
		}
		l.mu.Unlock()
		if ok {
			return &clientConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		_ = c.Close()
	}
}

func (l *clientLimitListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// clientConn gives its client's slot back once, when closed.
type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// ownListeners reports whether Serve opens f's listeners itself (TCP addresses), so that they
// can be capped; systemd sockets and vsock addresses are left to exporter-toolkit, uncapped.
func ownListeners(f *web.FlagConfig) bool {
	if f.WebSystemdSocket != nil && *f.WebSystemdSocket {
		return false
	}
	for _, a := range *f.WebListenAddresses {
		if strings.HasPrefix(a, "vsock://") {
			return false
		}
	}
	return true
}
