package publish

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slicemeter/slicemeter/exporter/spool"
	"github.com/slicemeter/slicemeter/exporter/spool/spooltest"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The operator case on a real 2 MiB tmpfs with the default 1 GiB spool limit: Kafka
// down long enough to fill the disk loses only the oldest batches (counted as spool_no_space,
// none as spool_error); once Kafka is back the spool drains, and the batches after it are all
// published, none dropped. Samples published + dropped = samples produced.
func TestSmallTmpfsOutageLosesOnlyTheOldest(t *testing.T) {
	dir := spooltest.MountTmpfs(t, "2m")
	w := &switchWriter{down: true}
	p, err := New(w, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler),
		Options{SpoolDir: dir, SpoolMaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.backoff, p.maxBackoff = time.Millisecond, 5*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	const perFlush = 100 // about 6.5 kB a batch
	produced, ts := 0, uint64(0)
	flush := func(n int) {
		for range n {
			ts++
			_ = p.Write(ctx, time.Unix(0, int64(ts)), bigTick(perFlush, ts))
			_ = p.Flush(ctx) // a failed spool write is counted as spool_error
			produced += perFlush
		}
	}
	wait := func(what string, cond func() bool) {
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("%s: %v", what, ctx.Err())
			}
			time.Sleep(time.Millisecond)
		}
	}
	flush(400) // 2.6 MB: more than the disk
	noSpace := testutil.ToFloat64(p.dropped.WithLabelValues(spool.ReasonNoSpace))
	spoolErr := testutil.ToFloat64(p.dropped.WithLabelValues(ReasonSpoolError))
	t.Logf("Kafka down, %d samples produced: %v dropped as %s, %v as %s, %d batches (%d bytes) spooled",
		produced, noSpace, spool.ReasonNoSpace, spoolErr, ReasonSpoolError, p.spool.Len(), p.spool.Bytes())
	if noSpace == 0 {
		t.Fatal("the disk never filled up")
	}
	// Only the oldest eighth(s) go to make room: the disk stays mostly used.
	if spoolErr != 0 || p.spool.Bytes() < 3<<19 {
		t.Errorf("%v spool errors, %d bytes spooled: want none, and at least 1.5 MiB of the 2 MiB kept", spoolErr, p.spool.Bytes())
	}
	w.set(false)
	wait("draining", func() bool { return p.spool.Len() == 0 })
	before := droppedTotal(p)
	flush(200) // after the outage: spooled and sent, no restart
	wait("publishing", func() bool { return testutil.ToFloat64(p.published)+droppedTotal(p) >= float64(produced) })
	cancel()
	<-done
	published := testutil.ToFloat64(p.published)
	if after := droppedTotal(p) - before; after != 0 {
		t.Errorf("%v samples dropped after the spool drained", after)
	}
	if published+droppedTotal(p) != float64(produced) {
		t.Errorf("%v published + %v dropped != %d produced", published, droppedTotal(p), produced)
	}
	// Published in order, and the batches missing are the oldest and as many as counted: all
	// but one that the sender was writing when the disk filled, whose write may have gone
	// through once Kafka was back (published, not dropped; a loaded machine's scheduling).
	sent := map[uint64]bool{}
	var prev uint64
	for _, m := range w.written {
		seq := decodeSeq(t, m.Value)
		if seq <= prev {
			t.Fatalf("batch %d published after batch %d", seq, prev)
		}
		sent[seq], prev = true, seq
	}
	var missing, newest uint64
	for seq := uint64(1); seq <= ts; seq++ {
		if !sent[seq] {
			missing, newest = missing+1, seq
		}
	}
	if float64(missing*perFlush) != droppedTotal(p) {
		t.Errorf("%d batches missing, %v samples counted dropped", missing, droppedTotal(p))
	}
	var early uint64
	for seq := range sent {
		if seq < newest {
			early++
		}
	}
	if early > 1 {
		t.Errorf("%d batches published that are older than a dropped one (batch %d): the oldest must be the ones dropped", early, newest)
	}
	if last := decodeSeq(t, w.written[len(w.written)-1].Value); last != ts {
		t.Errorf("the last batch published is seq %d, want %d: publishing did not resume", last, ts)
	}
	t.Logf("%d produced: %v published, %v dropped", produced, published, droppedTotal(p))
}
