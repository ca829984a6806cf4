package publish

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slicemeter/slicemeter/exporter/spool"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// fullDisk is a spool directory on a disk of quota bytes: a write that does not fit fails with
// ENOSPC after writing what fits.
type fullDisk struct {
	dir   string
	quota int64
}

func (d *fullDisk) used() int64 {
	entries, _ := os.ReadDir(d.dir)
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}

type diskFile struct {
	*os.File
	d *fullDisk
}

func (f diskFile) Write(p []byte) (int, error) {
	if free := f.d.quota - f.d.used(); int64(len(p)) > free {
		n, _ := f.File.Write(p[:max(0, free)])
		return n, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func (d *fullDisk) Free(string) int64 { return d.quota - d.used() }

func (d *fullDisk) Create(path string) (spool.SegmentWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return diskFile{f, d}, nil
}

// Kafka down and the spool's disk full (smaller than its size limit): the oldest batches are
// dropped and counted, and once Kafka is back the spool drains and publishing resumes without
// a restart. Samples published + dropped = samples produced.
func TestDiskFullDuringOutageRecovers(t *testing.T) {
	w := &switchWriter{down: true}
	disk := &fullDisk{dir: t.TempDir(), quota: 16 << 10}
	p, err := New(w, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler),
		Options{SpoolDir: disk.dir, SpoolMaxBytes: 1 << 20, SpoolDisk: disk})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.backoff, p.maxBackoff = time.Millisecond, 5*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	produced, ts := 0, uint64(0)
	flush := func(n int) {
		for range n {
			ts++
			_ = p.Write(ctx, time.Unix(0, int64(ts)), tick(map[string]int{"node-a": 20}, ts))
			_ = p.Flush(ctx) // a failed spool write is counted as spool_error
			produced += 20
		}
	}
	flush(300)
	dropped := func() float64 {
		var sum float64
		for _, r := range DropReasons() {
			sum += testutil.ToFloat64(p.dropped.WithLabelValues(r))
		}
		return sum
	}
	if got := testutil.ToFloat64(p.dropped.WithLabelValues(spool.ReasonNoSpace)); got == 0 {
		t.Fatalf("no samples counted as %s while the disk was full", spool.ReasonNoSpace)
	}
	w.set(false)
	for p.spool.Len() > 0 {
		time.Sleep(time.Millisecond)
	}
	flush(50) // after the outage: spooled and sent again, no restart
	for testutil.ToFloat64(p.published)+dropped() < float64(produced) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	published := testutil.ToFloat64(p.published)
	if published+dropped() != float64(produced) {
		t.Errorf("%v published + %v dropped != %d produced", published, dropped(), produced)
	}
	if last := decodeSeq(t, w.written[len(w.written)-1].Value); last != ts {
		t.Errorf("the last batch published is seq %d, want %d: publishing did not resume", last, ts)
	}
	t.Logf("%d produced: %v published, %v dropped (%v no space, %v spool errors)", produced, published, dropped(),
		testutil.ToFloat64(p.dropped.WithLabelValues(spool.ReasonNoSpace)), testutil.ToFloat64(p.dropped.WithLabelValues(ReasonSpoolError)))
}
