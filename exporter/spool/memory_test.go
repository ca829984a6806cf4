package spool

import (
	"errors"
	"fmt"
	"testing"
)

// The memory queue keeps order, stays within its limit by dropping the oldest records (each
// reported with its weight), and never pops a record Peek did not return.
func TestMemoryQueue(t *testing.T) {
	dropped := map[string]uint32{}
	m, err := NewMemory(1024, func(w uint32, reason string) { dropped[reason] += w })
	if err != nil {
		t.Fatal(err)
	}
	rec := func(i int) []byte { return []byte(fmt.Sprintf("%0100d", i)) } // 100 bytes
	for i := 0; i < 25; i++ {
		if err := m.Append(rec(i), 3); err != nil {
			t.Fatal(err)
		}
	}
	if m.Len() != 10 || m.Bytes() != 1000 || dropped[ReasonMemoryFull] != 15*3 {
		t.Fatalf("len %d bytes %d dropped %v; want 10, 1000, 45 samples as %s", m.Len(), m.Bytes(), dropped, ReasonMemoryFull)
	}
	got, w, ok, err := m.Peek()
	if err != nil || !ok || string(got) != string(rec(15)) || w != 3 {
		t.Fatalf("Peek: %q %d %v %v; want record 15", got, w, ok, err)
	}
	if err := m.Append(rec(25), 3); err != nil { // drops record 15, the one peeked
		t.Fatal(err)
	}
	if err := m.Pop(); err != nil || m.Len() != 10 {
		t.Fatalf("Pop after the peeked record was dropped removed another: len %d (%v)", m.Len(), err)
	}
	for i := 16; i <= 25; i++ {
		got, _, ok, _ := m.Peek()
		if !ok || string(got) != string(rec(i)) {
			t.Fatalf("record %d: got %q", i, got)
		}
		if err := m.Pop(); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, ok, _ := m.Peek(); ok || m.Bytes() != 0 {
		t.Errorf("not empty after popping everything: %d bytes", m.Bytes())
	}
	if err := m.Append(make([]byte, 2000), 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a record over the limit: %v, want ErrTooLarge", err)
	}
	if _, err := NewMemory(10, nil); err == nil {
		t.Error("a 10-byte limit was accepted")
	}
}
