package lograte

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// records is a slog.Handler that keeps each record as "message reason=… not_logged_since_last=…".
type records struct{ lines []string }

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" || a.Key == "not_logged_since_last" || a.Key == "latest" {
			line += fmt.Sprintf(" %s=%v", a.Key, a.Value)
		}
		return true
	})
	r.lines = append(r.lines, line)
	return nil
}

func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	type step struct {
		at     time.Duration
		reason string // empty: flush
		detail int
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string
	}{
		{"the first at once", []step{{0, "a", 1}}, []string{"m reason=a"}},
		{"repeats within the minute are counted, told by the next line", []step{{0, "a", 1}, {time.Second, "a", 2}, {30 * time.Second, "a", 3}, {time.Minute, "a", 4}},
			[]string{"m reason=a", "m reason=a not_logged_since_last=2"}},
		{"reasons apart", []step{{0, "a", 1}, {0, "b", 1}, {time.Second, "a", 2}, {time.Second, "b", 2}},
			[]string{"m reason=a", "m reason=b"}},
		{"flush tells what was held back, once a minute has passed", []step{{0, "a", 1}, {time.Second, "a", 2}, {30 * time.Second, "", 0}, {time.Minute, "", 0}, {2 * time.Minute, "", 0}},
			[]string{"m reason=a", "m reason=a not_logged_since_last=1 latest=[n=2]"}},
		{"after a flush, the count starts again", []step{{0, "a", 1}, {time.Second, "a", 2}, {time.Minute, "", 0}, {61 * time.Second, "a", 3}, {2*time.Minute + time.Second, "a", 4}},
			[]string{"m reason=a", "m reason=a not_logged_since_last=1 latest=[n=2]", "m reason=a not_logged_since_last=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &records{}
			l := New(slog.New(rec), time.Minute)
			for _, s := range tc.steps {
				if s.reason == "" {
					l.Flush(context.Background(), t0.Add(s.at))
				} else {
					l.Log(context.Background(), t0.Add(s.at), slog.LevelWarn, s.reason, "m", "n", s.detail)
				}
			}
			if got, want := strings.Join(rec.lines, "\n"), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("logged:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
