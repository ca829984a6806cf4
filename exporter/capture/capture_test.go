package capture

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readAll reads every frame of a capture, as a replay loads it.
func readAll(path string) error {
	r, err := Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		if _, err := r.Next(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func TestCorruptCaptureNamesTheOffset(t *testing.T) {
	good, err := os.ReadFile("testdata/node.capture")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"not a capture", []byte("hello\n"), "offset 0: not a slicemeter capture"},
		{"truncated", good[:len(good)/2], "offset"},
		{"flipped byte", func() []byte {
			b := append([]byte(nil), good...)
			b[len(b)/2] ^= 0x5a
			return b
		}(), "offset"},
		{"bad frame", gzipped(t, `{"version":1,"node":"n","interval_ns":100}`+"\n"+`{"t": "x"}`+"\n"), "decompressed offset 43: bad frame"},
		{"bad version", gzipped(t, `{"version":2,"interval_ns":1}`+"\n"), "version 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			err := readAll(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err %v, want one naming %s and %q", err, path, tc.want)
			}
		})
	}
}
