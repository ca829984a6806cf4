package lograte

import (
	"fmt"
	"log/slog"
	"unicode/utf8"
)

// The bounds of one logged value: a log line must stay readable and small whatever a request
// made of it (one tenant report once logged its 100,000 notes as a 17 MB line).
const (
	// MaxValue is the most bytes of one string or error value; the rest is cut and counted.
	MaxValue = 4 << 10
	// MaxItems is how many items of a list a line names (Few); the rest are counted.
	MaxItems = 5
)

// Few is a summary of a list for a log line: how many items there are, and the first MaxItems,
// each cut to MaxValue bytes.
func Few(items []string) slog.Value {
	first := make([]string, 0, min(len(items), MaxItems))
	for _, s := range items[:min(len(items), MaxItems)] {
		first = append(first, cut(s))
	}
	return slog.GroupValue(slog.Int("count", len(items)), slog.Any("first", first))
}

// Cap is a slog.HandlerOptions.ReplaceAttr bounding every value a line holds: a string or an
// error's text over MaxValue bytes is cut (saying how long it was), a list of strings over
// MaxItems (or with an item over MaxValue) becomes Few's summary.
func Cap(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); len(s) > MaxValue {
			a.Value = slog.StringValue(cut(s))
		}
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			if s := v.Error(); len(s) > MaxValue {
				a.Value = slog.StringValue(cut(s))
			}
		case []string:
			if len(v) > MaxItems || longest(v) > MaxValue {
				a.Value = Few(v)
			}
		}
	}
	return a
}

// cut is s in at most MaxValue bytes: its start (cut on a rune boundary) and how long it was.
// What it returns is never cut again (Cap sees the values of Few's group too).
func cut(s string) string {
	if len(s) <= MaxValue {
		return s
	}
	n := MaxValue - 64 // room for the length
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes in all)", s[:n], len(s))
}

func longest(items []string) int {
	n := 0
	for _, s := range items {
		n = max(n, len(s))
	}
	return n
}
