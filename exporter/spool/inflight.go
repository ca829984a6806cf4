package spool

// inFlight is what a queue knows of the record Peek returned while the sender writes it to
// Kafka, once the queue has dropped it to make room: not counted as dropped then (the write may
// succeed), but by the next Peek or Close unless Pop says it was delivered. Counted exactly once
// either way. Both queues (Spool, Memory) use it under their lock.
type inFlight struct {
	weight uint32
	reason string // the drop reason; "" while the peeked record is still queued (or none is)
}

// drop records that the peeked record of weight was dropped for reason.
func (f *inFlight) drop(weight uint32, reason string) { f.weight, f.reason = weight, reason }

// delivered is Pop's: it says whether the delivered record had been dropped (nothing left to
// remove), and forgets it.
func (f *inFlight) delivered() bool {
	dropped := f.reason != ""
	f.reason = ""
	return dropped
}

// settle counts a dropped record that was not delivered (the sender moved on, or the queue
// closes).
func (f *inFlight) settle(onDrop Drop) {
	if f.reason != "" {
		onDrop(f.weight, f.reason)
		f.reason = ""
	}
}
