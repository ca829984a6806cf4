package auth

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// failures limits the wrong tokens each client address may send: a bucket of failBurst
// failures, refilled one every failRefill. Past it, a wrong token is answered 429 with
// Retry-After, and an address may no longer make the service try bcrypt on the entries
// without a lookup key. The map is bounded (maxAddrs); a flood from more addresses evicts
// the buckets that are full again first, then arbitrary ones.
type failures struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	left float64 // failures the address may still make
	at   time.Time
}

const (
	failBurst  = 10
	failRefill = 6 * time.Second // 10 a minute
	maxAddrs   = 4096
)

func newFailures() *failures {
	return &failures{buckets: map[string]*bucket{}, now: time.Now}
}

// refill brings b up to t.
func (b *bucket) refill(t time.Time) {
	b.left = min(failBurst, b.left+float64(t.Sub(b.at))/float64(failRefill))
	b.at = t
}

// wait is how long until b has a failure left; 0: it has one now.
func (b *bucket) wait() time.Duration {
	if b.left >= 1 {
		return 0
	}
	return time.Duration((1 - b.left) * float64(failRefill))
}

// blocked says how long addr must wait before it may fail again; 0: it may now.
func (f *failures) blocked(addr string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.buckets[addr]
	if !ok {
		return 0
	}
	b.refill(f.now())
	return b.wait()
}

// fail counts a wrong token of addr; past the limit it is not counted but answered with the
// time to wait (> 0).
func (f *failures) fail(addr string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.now()
	b, ok := f.buckets[addr]
	if !ok {
		f.evict(t)
		b = &bucket{left: failBurst, at: t}
		f.buckets[addr] = b
	}
	b.refill(t)
	if w := b.wait(); w > 0 {
		return w
	}
	b.left--
	return 0
}

// evict makes room for one more address.
func (f *failures) evict(t time.Time) {
	if len(f.buckets) < maxAddrs {
		return
	}
	for a, b := range f.buckets {
		if b.refill(t); b.left >= failBurst {
			delete(f.buckets, a)
		}
	}
	for a := range f.buckets {
		if len(f.buckets) < maxAddrs {
			break
		}
		delete(f.buckets, a)
	}
}

// addressOf is the client address a request's failures count against: its IP (not the
// port, which a client chooses), an IPv6 address by its /64 (what one host is given).
// Forwarded headers are not trusted: anyone can write them.
func addressOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
