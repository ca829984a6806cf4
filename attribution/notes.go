package attribution

import "context"

// quietNotes is the context key of WithoutNoteLogs.
type quietNotes struct{}

// WithoutNoteLogs returns a context under which Compute and its variants leave the logging of
// their report's notes (Report.Notes) to the caller: the attribution service computes every
// minute again and again within its lookback, and logs each kind of note at most once a
// minute instead of once per minute computed.
func WithoutNoteLogs(ctx context.Context) context.Context {
	return context.WithValue(ctx, quietNotes{}, true)
}

// LogsNotes reports whether a computation under ctx logs its report's notes itself (see
// WithoutNoteLogs).
func LogsNotes(ctx context.Context) bool {
	quiet, _ := ctx.Value(quietNotes{}).(bool)
	return !quiet
}
