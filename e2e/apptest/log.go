package apptest

import (
	"bytes"
	"os"
	"regexp"
	"sync"
)

// logWriter keeps a process's output in a file and in memory, and watches it, line by line,
// for the first match of a pattern (the listen address).
type logWriter struct {
	path    string
	pattern *regexp.Regexp
	found   chan struct{} // closed at the first match

	mu      sync.Mutex
	file    *os.File
	buf     bytes.Buffer
	scanned int    // bytes of buf already searched for whole lines
	matched string // the pattern's first submatch, once found
}

func newLogWriter(f *os.File, pattern *regexp.Regexp) *logWriter {
	return &logWriter{path: f.Name(), pattern: pattern, found: make(chan struct{}), file: f}
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file != nil {
		_, _ = w.file.Write(p) // the in-memory copy is what tests read; the file is for after
	}
	w.buf.Write(p)
	if w.matched == "" {
		rest := w.buf.Bytes()[w.scanned:]
		if i := bytes.LastIndexByte(rest, '\n'); i >= 0 {
			if m := w.pattern.FindSubmatch(rest[:i]); m != nil {
				w.matched = string(m[1])
				close(w.found)
			}
			w.scanned += i + 1
		}
	}
	return len(p), nil
}

func (w *logWriter) match() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.matched
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *logWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file != nil {
		_ = w.file.Close()
		w.file = nil
	}
}
