package kafkaconn_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/slicemeter/slicemeter/internal/kafkaconn"
)

// TestErrorLogger: kafka-go's complaint about a read of an idle partition that timed out is
// logged at debug, not as a warning (a healthy collector logged 135 of them in 12.5 minutes);
// a real error is a warning, once per kind per minute however often it repeats.
func TestErrorLogger(t *testing.T) {
	// kafka-go's own formats (reader.go).
	const (
		readErr = "the kafka reader got an unknown error reading partition %d of %s at offset %d: %s"
		initErr = "error initializing the kafka reader for partition %d of %s: %s"
	)
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name       string
		format     string
		err        error
		times      int
		warn, debg int // lines at each level
	}{
		{"idle partition read timeout", readErr, timeout, 50, 0, 50},
		{"wrapped timeout", readErr, errors.Join(errors.New("fetch"), timeout), 1, 0, 1},
		{"connection reset while reading", readErr, reset, 1, 1, 0},
		{"repeated reset: one line", readErr, reset, 200, 1, 0},
		{"a dial that times out is a warning", initErr, timeout, 3, 1, 0},
		{"refused", initErr, refused, 10, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := kafkaconn.ErrorLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
			for i := range tc.times {
				if tc.format == readErr {
					l.Printf(tc.format, i%4, "slicemeter.samples.v1", 17, tc.err)
				} else {
					l.Printf(tc.format, i%4, "slicemeter.samples.v1", tc.err)
				}
			}
			out := buf.String()
			if w, d := strings.Count(out, "level=WARN"), strings.Count(out, "level=DEBUG"); w != tc.warn || d != tc.debg {
				t.Errorf("%d WARN and %d DEBUG lines, want %d and %d:\n%s", w, d, tc.warn, tc.debg, out)
			}
		})
	}
}
