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

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/spool"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// brokenDisk is a spool directory whose segment writes all fail (a disk gone read-only).
type brokenDisk struct{ dir string }

type brokenFile struct{ *os.File }

func (brokenFile) Write([]byte) (int, error) { return 0, syscall.EIO }

func (brokenDisk) Free(string) int64 { return -1 }

func (d brokenDisk) Create(path string) (spool.SegmentWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return brokenFile{f}, nil
}

func nodes(n, perNode int, ts uint64) []exporter.NodeSamples {
	var out []exporter.NodeSamples
	for i := range n {
		ns := exporter.NodeSamples{Node: "node-" + string(rune('a'+i))}
		for j := range perNode {
			ns.Samples = append(ns.Samples, &pb.Sample{TsNs: ts, InstanceId: "inst-" + string(rune('a'+j%26))})
		}
		out = append(out, ns)
	}
	return out
}

func droppedTotal(p *Publisher) (sum float64) {
	for _, r := range DropReasons() {
		sum += testutil.ToFloat64(p.dropped.WithLabelValues(r))
	}
	return sum
}

// A flush whose spool writes fail tries every message (every node, both halves of a split
// batch) and counts every sample it could not keep: spooled + dropped == produced.
func TestFlushCountsEveryMessageNotSpooled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   int
		maxMsg  int64 // SetMaxMessageBytes; 0: the default, no split
		perNode int
	}{
		{name: "three nodes", nodes: 3, perNode: 20},
		{name: "a batch split in parts", nodes: 1, perNode: 300, maxMsg: 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := brokenDisk{dir: t.TempDir()}
			p, err := New(&switchWriter{down: true}, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler),
				Options{SpoolDir: disk.dir, SpoolMaxBytes: 1 << 20, SpoolDisk: disk})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if tc.maxMsg > 0 {
				p.SetMaxMessageBytes(tc.maxMsg)
			}
			ctx := context.Background()
			_ = p.Write(ctx, time.Unix(0, 1), nodes(tc.nodes, tc.perNode, 1))
			if err := p.Flush(ctx); err == nil {
				t.Error("Flush returned nil while no spool write succeeded")
			}
			produced := float64(tc.nodes * tc.perNode)
			if got := testutil.ToFloat64(p.dropped.WithLabelValues(ReasonSpoolError)); got != produced {
				t.Errorf("%v samples counted as %s, want all %v produced", got, ReasonSpoolError, produced)
			}
			if spooled := p.spool.Len(); spooled != 0 || droppedTotal(p) != produced {
				t.Errorf("%d batches spooled, %v samples dropped: want 0 and %v", spooled, droppedTotal(p), produced)
			}
		})
	}
}

// A spool whose segments are smaller than a Kafka batch (a small --spool.max-bytes) gets the
// batches split to fit a segment: they are spooled and delivered, not dropped as spool_error.
func TestSmallSpoolSplitsBatchesToFit(t *testing.T) {
	w := &switchWriter{down: true}
	p, err := New(w, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler),
		Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 64 << 10}) // segments of 8 KiB; a batch of 300 is ~17 KB
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	for ts := uint64(1); ts <= 3; ts++ {
		_ = p.Write(ctx, time.Unix(0, int64(ts)), bigTick(300, ts))
		if err := p.Flush(ctx); err != nil {
			t.Fatalf("flush %d: %v", ts, err)
		}
	}
	w.set(false)
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(p.published); got != 900 || droppedTotal(p) != 0 {
		t.Errorf("%v published, %v dropped (%v spool errors): want 900 and 0", got, droppedTotal(p), testutil.ToFloat64(p.dropped.WithLabelValues(ReasonSpoolError)))
	}
}
