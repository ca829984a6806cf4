package spool

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// smallDisk is a file system of quota bytes under dir: a segment write that does not fit writes
// what fits and fails with ENOSPC, as a full tmpfs does.
type smallDisk struct {
	t     *testing.T
	dir   string
	quota int64
}

func (d *smallDisk) used() int64 {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		d.t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}

func (d *smallDisk) Free(string) int64 { return d.quota - d.used() }

func (d *smallDisk) Create(path string) (SegmentWriter, error) {
	f, err := createFile(path)
	if err != nil {
		return nil, err
	}
	return &quotaWriter{f: f, d: d}, nil
}

type quotaWriter struct {
	f SegmentWriter
	d *smallDisk
}

func (w *quotaWriter) Write(p []byte) (int, error) {
	if free := w.d.quota - w.d.used(); int64(len(p)) > free {
		n, _ := w.f.Write(p[:max(0, free)])
		return n, syscall.ENOSPC
	}
	return w.f.Write(p)
}

func (w *quotaWriter) Close() error { return w.f.Close() }

// A spool whose disk fills up (its size limit above the disk's size, as with a spool on a small
// tmpfs while Kafka is down) drops its oldest data to make room, counted as spool_no_space, and
// keeps spooling; once drained it gives the space back, and new records are spooled again with
// no drop and no restart. Every record is either read back, in order, or counted as dropped.
func TestDiskFullDropsOldestAndRecovers(t *testing.T) {
	dir := t.TempDir()
	disk := &smallDisk{t: t, dir: dir, quota: 32 << 10}
	var d drops
	s, err := Open(dir, 1<<20, Options{OnDrop: d.fn(), Disk: disk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := func(i int) []byte { return []byte(fmt.Sprintf("%01000d", i)) }
	const weight, n = 10, 200
	failed := 0
	for i := 0; i < n; i++ {
		if err := s.Append(rec(i), weight); err != nil {
			failed++
		}
		if u := disk.used(); u > disk.quota {
			t.Fatalf("record %d: %d bytes used on a %d-byte disk", i, u, disk.quota)
		}
	}
	if d.reason[ReasonNoSpace] == 0 {
		t.Fatalf("the disk filled up but nothing was dropped: %v", d.reason)
	}
	got := drain(t, s)
	t.Logf("%d appended: %d read back, %d dropped (%v), %d appends failed", n, len(got), d.n, d.reason, failed)
	if int(d.weight)+len(got)*weight+failed*weight != n*weight {
		t.Errorf("%d records read, %d samples dropped, %d appends failed: they must add up to the %d appended", len(got), d.weight, failed, n)
	}
	last := -1
	for _, r := range got {
		i, err := strconv.Atoi(r)
		if err != nil || i <= last {
			t.Fatalf("record %q after %d: torn or out of order", r, last)
		}
		last = i
	}
	if last != n-1 {
		t.Errorf("the newest record read is %d, want %d: the newest data survives", last, n-1)
	}
	if u := disk.used(); u > 1024 {
		t.Errorf("%d bytes still used once drained: the read segment was not reclaimed", u)
	}
	// Space is back: spooling resumes with no drop.
	before := d.n
	for i := n; i < n+20; i++ {
		if err := s.Append(rec(i), weight); err != nil {
			t.Fatalf("record %d after the spool drained: %v", i, err)
		}
	}
	if d.n != before {
		t.Errorf("%d records dropped after the space came back", d.n-before)
	}
	if again := drain(t, s); len(again) != 20 {
		t.Errorf("%d records read back after recovery, want 20", len(again))
	}
	// A reopened spool reads what is left consistently (no torn tail).
	if err := s.Append(rec(999), weight); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(dir, 1<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if left := drain(t, s2); len(left) != 1 || left[0] != string(rec(999)) {
		t.Errorf("after reopening: %d records %v", len(left), len(left))
	}
}
