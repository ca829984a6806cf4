package service

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// How often the service pings ClickHouse for /readyz, and how long a ping may take: a
// replica that cannot reach ClickHouse can neither attribute nor answer a report, so a load
// balancer should stop sending it callers within seconds.
const (
	pingEvery   = 5 * time.Second
	pingTimeout = 3 * time.Second
)

// pinger keeps the outcome of the latest ClickHouse ping; /readyz is not ready while it failed.
type pinger struct {
	ping   func(context.Context) error
	logger *slog.Logger
	mu     sync.Mutex
	err    error // of the latest ping; nil: it answered
}

// run pings every interval until ctx ends.
func (p *pinger) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			p.check(ctx)
		}
	}
}

// check pings once and keeps the outcome, logging when it changes.
func (p *pinger) check(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err := p.ping(pctx)
	cancel()
	if ctx.Err() != nil {
		return // stopping: not a fault of ClickHouse
	}
	p.mu.Lock()
	was := p.err
	p.err = err
	p.mu.Unlock()
	switch {
	case err != nil && was == nil:
		p.logger.ErrorContext(ctx, "ClickHouse is unreachable: /readyz says not ready", "err", err)
	case err == nil && was != nil:
		p.logger.InfoContext(ctx, "ClickHouse answers again: /readyz says ready")
	}
}

// missing is what /readyz lacks: ClickHouse, while its latest ping failed.
func (p *pinger) missing() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return []string{"clickhouse: " + p.err.Error()}
	}
	return nil
}
