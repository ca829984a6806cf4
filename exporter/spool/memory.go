package spool

import (
	"fmt"
	"sync"
)

// ReasonMemoryFull is the Drop reason of a Memory queue dropping its oldest record to stay
// within its limit.
const ReasonMemoryFull = "memory_queue_full"

// Memory is the spool's in-memory counterpart for an exporter without a spool directory: a
// bounded FIFO with the same methods, whose oldest records are dropped (and reported) when it
// is full, and whose content is lost when the process ends. It is safe for concurrent use.
type Memory struct {
	maxBytes int64
	onDrop   Drop

	mu     sync.Mutex
	recs   []memRecord // oldest first
	bytes  int64
	peeked bool     // recs[0] is the record Peek returned
	flight inFlight // that record, once Append dropped it
}

type memRecord struct {
	rec    []byte
	weight uint32
}

// NewMemory returns an empty queue limited to maxBytes of records.
func NewMemory(maxBytes int64, onDrop Drop) (*Memory, error) {
	if maxBytes < 1024 {
		return nil, fmt.Errorf("memory queue: size limit %d bytes is below the minimum 1024", maxBytes)
	}
	if onDrop == nil {
		onDrop = func(uint32, string) {}
	}
	return &Memory{maxBytes: maxBytes, onDrop: onDrop}, nil
}

// Append adds a copy of rec at the end, dropping the oldest records first while it would not fit.
func (m *Memory) Append(rec []byte, weight uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	size := int64(len(rec))
	if size > m.maxBytes {
		return fmt.Errorf("memory queue: %w (%d > %d bytes)", ErrTooLarge, size, m.maxBytes)
	}
	for m.bytes+size > m.maxBytes {
		old := m.recs[0]
		m.recs[0] = memRecord{}
		m.recs = m.recs[1:]
		m.bytes -= int64(len(old.rec))
		if m.peeked {
			m.peeked = false
			m.flight.drop(old.weight, ReasonMemoryFull)
			continue
		}
		m.onDrop(old.weight, ReasonMemoryFull)
	}
	m.recs = append(m.recs, memRecord{rec: append([]byte(nil), rec...), weight: weight})
	m.bytes += size
	return nil
}

// MaxRecord is the largest record Append takes, in bytes: the size limit.
func (m *Memory) MaxRecord() int64 { return m.maxBytes }

// Peek returns the oldest record and its weight without removing it; ok is false when empty.
func (m *Memory) Peek() (rec []byte, weight uint32, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flight.settle(m.onDrop)
	if len(m.recs) == 0 {
		return nil, 0, false, nil
	}
	m.peeked = true
	return m.recs[0].rec, m.recs[0].weight, true, nil
}

// Pop removes the record Peek returned, once it was delivered; if Append has dropped it
// meanwhile, it does nothing (the new oldest record was not returned yet) and the record is not
// counted as dropped.
func (m *Memory) Pop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.flight.delivered() || !m.peeked {
		return nil
	}
	m.peeked = false
	m.bytes -= int64(len(m.recs[0].rec))
	m.recs[0] = memRecord{}
	m.recs = m.recs[1:]
	return nil
}

// Len is the number of records.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// Bytes is the size of the records held.
func (m *Memory) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

// Close counts a record dropped while in flight and not delivered; what the queue holds is
// lost with the process.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flight.settle(m.onDrop)
	return nil
}
