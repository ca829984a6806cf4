package lograte

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

// TestCap: whatever a line is given (100,000 notes, a 1 MB error), it stays a few KB and says
// how much there was; short values pass as they are.
func TestCap(t *testing.T) {
	notes := make([]string, 100_000)
	for i := range notes {
		notes[i] = fmt.Sprintf("allocation %q overlaps allocation %q on node-%d/gpu0", fmt.Sprint("a", i), fmt.Sprint("b", i), i)
	}
	big := strings.Repeat("é", 1<<19) // 1 MB of two-byte runes: the cut must not split one
	for _, tc := range []struct {
		name string
		args []any
		want []string // in the line
		max  int      // bytes of the line
	}{
		{"100k notes", []any{"notes", notes}, []string{"count=100000", `allocation \"a0\"`, `allocation \"a4\"`}, 2 << 10},
		{"summary of 100k notes", []any{"notes", Few(notes)}, []string{"notes.count=100000", `allocation \"a4\"`}, 2 << 10},
		{"1 MB error", []any{"err", errors.New(big)}, []string{"(1048576 bytes in all)"}, MaxValue + 100},
		{"1 MB string", []any{"s", big}, []string{"(1048576 bytes in all)"}, MaxValue + 100},
		{"a long note", []any{"notes", []string{"short", big}}, []string{"count=2", "short", "(1048576 bytes in all)"}, MaxValue + 100},
		{"short ones", []any{"notes", []string{"x", "y"}, "err", errors.New("boom")}, []string{"notes=\"[x y]\"", "err=boom"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: Cap})).Warn("attribution report notes", tc.args...)
			line := buf.String()
			if len(line) > tc.max || !utf8.ValidString(line) {
				t.Errorf("%d bytes (valid UTF-8: %v), want at most %d", len(line), utf8.ValidString(line), tc.max)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("the line lacks %q: %.300s", w, line)
				}
			}
			if strings.Contains(line, `a5\"`) {
				t.Errorf("the line names a sixth note: %.300s", line)
			}
		})
	}
}
