// Package lograte logs a recurring problem at most once per reason per period, so that what
// repeats (a refused message in a stream of them, an allocation left out of every minute) is
// logged with its reason without flooding the log; the counters of the components say how
// many there were.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limiter logs at most one line per reason per period: the first occurrence is logged at once
// with its detail; the next ones in the period are counted, and the next line of the reason
// says how many were not logged (Flush writes that line when no new occurrence comes). Safe for
// concurrent use.
type Limiter struct {
	logger  *slog.Logger
	every   time.Duration
	mu      sync.Mutex
	reasons map[string]*reasonLog
}

// reasonLog is what one reason logged last and has held back since.
type reasonLog struct {
	level      slog.Level
	msg        string
	last       time.Time // when a line of it was last logged
	suppressed int       // occurrences since then, not logged
	detail     []any     // of the latest suppressed occurrence
}

// New logs through logger at most once per reason every period.
func New(logger *slog.Logger, every time.Duration) *Limiter {
	return &Limiter{logger: logger, every: every, reasons: map[string]*reasonLog{}}
}

// Log logs msg with args for reason at now, unless the reason was logged less than a period
// ago; then it is counted.
func (l *Limiter) Log(ctx context.Context, now time.Time, level slog.Level, reason, msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reasons[reason]
	if r == nil {
		r = &reasonLog{}
		l.reasons[reason] = r
	} else if now.Sub(r.last) < l.every {
		r.level, r.msg, r.detail = level, msg, args
		r.suppressed++
		return
	}
	attrs := append([]any{"reason", reason}, args...)
	if r.suppressed > 0 {
		attrs = append(attrs, "not_logged_since_last", r.suppressed)
	}
	l.logger.Log(ctx, level, msg, attrs...)
	r.last, r.suppressed, r.detail = now, 0, nil
}

// Flush logs, for every reason with occurrences held back for a period or more, how many
// there were, with the latest one's detail.
func (l *Limiter) Flush(ctx context.Context, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for reason, r := range l.reasons {
		if r.suppressed == 0 || now.Sub(r.last) < l.every {
			continue
		}
		attrs := append([]any{"reason", reason, "not_logged_since_last", r.suppressed, "since", r.last, "latest"}, slog.GroupValue(toAttrs(r.detail)...))
		l.logger.Log(ctx, r.level, r.msg, attrs...)
		r.last, r.suppressed, r.detail = now, 0, nil
	}
}

// toAttrs turns slog's alternating key/value arguments into attributes.
func toAttrs(args []any) []slog.Attr {
	var out []slog.Attr
	for len(args) > 0 {
		switch k := args[0].(type) {
		case slog.Attr:
			out, args = append(out, k), args[1:]
		case string:
			if len(args) == 1 {
				out, args = append(out, slog.Any("!BADKEY", k)), nil
				continue
			}
			out, args = append(out, slog.Any(k, args[1])), args[2:]
		default:
			out, args = append(out, slog.Any("!BADKEY", k)), args[1:]
		}
	}
	return out
}
