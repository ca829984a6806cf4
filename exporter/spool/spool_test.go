package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

type drops struct {
	n      int
	weight uint32
	reason map[string]int
}

func (d *drops) fn() Drop {
	d.reason = map[string]int{}
	return func(w uint32, reason string) { d.n++; d.weight += w; d.reason[reason]++ }
}

func drain(t *testing.T, s *Spool) []string {
	t.Helper()
	var out []string
	for {
		rec, _, ok, err := s.Peek()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, string(rec))
		if err := s.Pop(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSpool(t *testing.T) {
	tests := []struct {
		name      string
		limit     int64
		records   int
		size      int
		reopen    bool
		wantFirst int // index of the first record that survives
		wantDrops int
	}{
		{name: "in order", limit: 1 << 20, records: 100, size: 100},
		{name: "in order across a restart", limit: 1 << 20, records: 100, size: 100, reopen: true},
		// Segments of 1 KiB hold 9 records of 112 bytes; 8 KiB keep 73 records, the newest.
		{name: "full: the oldest are dropped and counted", limit: 8 << 10, records: 100, size: 100, wantFirst: 27, wantDrops: 27},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var d drops
			s, err := Open(dir, tc.limit, Options{OnDrop: d.fn()})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.records {
				rec := fmt.Sprintf("%0*d", tc.size, i)
				if err := s.Append([]byte(rec), 7); err != nil {
					t.Fatal(err)
				}
			}
			if s.Bytes() > tc.limit {
				t.Errorf("spool holds %d bytes, over its limit %d", s.Bytes(), tc.limit)
			}
			if tc.reopen {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if s, err = Open(dir, tc.limit, Options{OnDrop: d.fn()}); err != nil {
					t.Fatal(err)
				}
			}
			got := drain(t, s)
			if len(got) != tc.records-tc.wantFirst {
				t.Fatalf("%d records back, want %d", len(got), tc.records-tc.wantFirst)
			}
			for i, r := range got {
				if want := fmt.Sprintf("%0*d", tc.size, tc.wantFirst+i); r != want {
					t.Fatalf("record %d = %s…, want %s…", i, r[len(r)-4:], want[len(want)-4:])
				}
			}
			if d.n != tc.wantDrops || d.weight != uint32(7*tc.wantDrops) {
				t.Errorf("dropped %d records of weight %d, want %d", d.n, d.weight, tc.wantDrops)
			}
		})
	}
}

func TestPartlyReadSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 1<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Append([]byte{byte('a' + i)}, 1); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, _, _, err := s.Peek(); err != nil {
			t.Fatal(err)
		}
		if err := s.Pop(); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(dir, 1<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, s); fmt.Sprint(got) != "[c d e]" {
		t.Errorf("after restart %v, want [c d e]", got)
	}
}

func TestTornTailAndCorruption(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 1<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"one", "two", "three"} {
		if err := s.Append([]byte(r), 1); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	seg := filepath.Join(dir, fmt.Sprintf("%016d.seg", 1))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{200, 0, 0, 0, 1, 2}) // a torn append
	f.Close()
	b, _ := os.ReadFile(seg)
	b[headerSize+3+headerSize] ^= 0xff // corrupt "two"
	os.WriteFile(seg, b, 0o644)

	var d drops
	s, err = Open(dir, 1<<20, Options{OnDrop: d.fn()})
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, s); fmt.Sprint(got) != "[one]" {
		t.Errorf("got %v, want [one]: a corrupt record ends what can be trusted in its segment", got)
	}
	if d.reason["spool_corrupt"] != 1 {
		t.Errorf("drops %+v, want one spool_corrupt", d)
	}
}

func BenchmarkAppendPop(b *testing.B) {
	s, err := Open(b.TempDir(), 64<<20, Options{})
	if err != nil {
		b.Fatal(err)
	}
	rec := make([]byte, 4096)
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if err := s.Append(rec, 1); err != nil {
			b.Fatal(err)
		}
		if _, _, _, err := s.Peek(); err != nil {
			b.Fatal(err)
		}
		if err := s.Pop(); err != nil {
			b.Fatal(err)
		}
	}
}
