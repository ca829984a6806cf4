// Package faillimit limits the wrong credentials each client address may send, so that a
// flood of them is answered cheaply (429, no bcrypt) instead of holding the cores that valid
// callers need.
package faillimit

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Limiter gives each address a bucket of Burst failures, refilled one every Refill. The map
// of addresses is bounded (MaxAddrs); a flood from more addresses evicts the buckets that are
// full again first, then arbitrary ones.
type Limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	// Now is the clock; a seam for tests.
	Now func() time.Time
}

type bucket struct {
	left float64 // failures the address may still make
	at   time.Time
}

// The limits: 10 failures at once, then one every 6 s (10 a minute).
const (
	Burst    = 10
	Refill   = 6 * time.Second
	MaxAddrs = 4096
)

// New is a limiter with no failures counted.
func New() *Limiter {
	return &Limiter{buckets: map[string]*bucket{}, Now: time.Now}
}

// refill brings b up to t.
func (b *bucket) refill(t time.Time) {
	b.left = min(Burst, b.left+float64(t.Sub(b.at))/float64(Refill))
	b.at = t
}

// wait is how long until b has a failure left; 0: it has one now.
func (b *bucket) wait() time.Duration {
	if b.left >= 1 {
		return 0
	}
	return time.Duration((1 - b.left) * float64(Refill))
}

// Fail counts a wrong credential of addr; past the limit it is not counted but answered with
// the time to wait (> 0). A check that costs (bcrypt) is counted before it is made, as if it
// would fail, and Refund-ed when it succeeds: so many requests arriving at once from one
// address cannot all start a check before the first of them has failed.
func (l *Limiter) Fail(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.Now()
	b, ok := l.buckets[addr]
	if !ok {
		l.evict(t)
		b = &bucket{left: Burst, at: t}
		l.buckets[addr] = b
	}
	b.refill(t)
	if w := b.wait(); w > 0 {
		return w
	}
	b.left--
	return 0
}

// Refund gives back a failure counted by Fail before a check that succeeded.
func (l *Limiter) Refund(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.buckets[addr]; ok {
		b.refill(l.Now())
		b.left = min(Burst, b.left+1)
	}
}

// Len is the number of addresses held.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// evict makes room for one more address.
func (l *Limiter) evict(t time.Time) {
	if len(l.buckets) < MaxAddrs {
		return
	}
	for a, b := range l.buckets {
		if b.refill(t); b.left >= Burst {
			delete(l.buckets, a)
		}
	}
	for a := range l.buckets {
		if len(l.buckets) < MaxAddrs {
			break
		}
		delete(l.buckets, a)
	}
}

// RetryAfter is a wait in whole seconds (at least one), for a Retry-After header.
func RetryAfter(wait time.Duration) time.Duration {
	return max(time.Second, (wait + time.Second - 1).Truncate(time.Second))
}

// Address is the client address a request's failures count against: its IP (not the port,
// which a client chooses), an IPv6 address by its /64 (what one host is given). Forwarded
// headers are not trusted: anyone can write them.
func Address(r *http.Request) string {
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
