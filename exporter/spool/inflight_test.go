package spool

import (
	"fmt"
	"testing"
)

// queue is what the publisher's sender uses of both the disk spool and the memory queue.
type queue interface {
	Append(rec []byte, weight uint32) error
	Peek() ([]byte, uint32, bool, error)
	Pop() error
	Close() error
}

// A record dropped to make room while the sender writes it (between Peek and Pop) is counted
// exactly once: not at all when the write succeeded (Pop), as dropped when it failed (the next
// Peek, or Close). Every other record dropped is counted at once.
func TestRecordDroppedInFlight(t *testing.T) {
	queues := []struct {
		name string
		open func(t *testing.T, onDrop Drop) queue
	}{
		{"spool", func(t *testing.T, onDrop Drop) queue {
			// Segments of 1 KiB hold 9 records of 112 bytes; 8 KiB keep 73.
			s, err := Open(t.TempDir(), 8<<10, Options{OnDrop: onDrop})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"memory", func(t *testing.T, onDrop Drop) queue {
			m, err := NewMemory(8<<10, onDrop)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
	}
	for _, q := range queues {
		for _, tc := range []struct {
			name      string
			delivered bool // the in-flight write succeeded: Pop
			closeNext bool // else: the queue closed before the next Peek
		}{
			{name: "delivered", delivered: true},
			{name: "not delivered, peeked again"},
			{name: "not delivered, closed", closeNext: true},
		} {
			t.Run(q.name+"/"+tc.name, func(t *testing.T) {
				var dropped uint32
				s := q.open(t, func(w uint32, _ string) { dropped += w })
				rec := func(i int) []byte { return []byte(fmt.Sprintf("%0100d", i)) }
				appended := 0
				appendN := func(n int) {
					for range n {
						if err := s.Append(rec(appended), 1); err != nil {
							t.Fatal(err)
						}
						appended++
					}
				}
				appendN(10)
				if got, _, ok, err := s.Peek(); err != nil || !ok || string(got) != string(rec(0)) {
					t.Fatalf("Peek: %q %v %v, want record 0", got, ok, err)
				}
				appendN(200) // record 0, in flight, is dropped with others
				if dropped == 0 {
					t.Fatal("nothing dropped: the queue never filled")
				}
				before := dropped
				var left uint32
				switch {
				case tc.delivered:
					if err := s.Pop(); err != nil {
						t.Fatalf("Pop of the delivered record the queue dropped: %v", err)
					}
				case tc.closeNext:
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					if dropped != before+1 {
						t.Errorf("closed with the undelivered in-flight record: dropped %d, want %d", dropped, before+1)
					}
					return
				}
				// Everything kept is read once, in order, after the dropped ones.
				first := -1
				for {
					got, _, ok, err := s.Peek()
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						break
					}
					var i int
					fmt.Sscanf(string(got), "%d", &i)
					if first < 0 {
						first = i
					}
					left++
					if err := s.Pop(); err != nil {
						t.Fatal(err)
					}
				}
				delivered := left
				if tc.delivered {
					delivered++
				}
				if delivered+dropped != uint32(appended) {
					t.Errorf("%d delivered + %d dropped != %d appended", delivered, dropped, appended)
				}
				if want := int(dropped); tc.delivered && first != want+1 || !tc.delivered && first != want {
					t.Errorf("first record read after the drops: %d (dropped %d, delivered first: %v)", first, dropped, tc.delivered)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
