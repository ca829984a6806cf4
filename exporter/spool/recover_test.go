package spool

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"testing"

	"github.com/slicemeter/slicemeter/exporter/spool/spooltest"
)

// Once the disk has room again, the spool takes records up to its configured limit: a full disk
// is not remembered as a smaller limit (that dropped every new record as spool_no_space after
// the space came back, until a restart).
func TestSpaceReturnsConfiguredLimitHolds(t *testing.T) {
	dir := t.TempDir()
	disk := &smallDisk{t: t, dir: dir, quota: 64 << 10}
	var d drops
	s, err := Open(dir, 1<<20, Options{OnDrop: d.fn(), Disk: disk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := func(i int) []byte { return []byte(fmt.Sprintf("%01000d", i)) }
	i := 0
	for ; d.reason[ReasonNoSpace] == 0 && i < 1000; i++ {
		if err := s.Append(rec(i), 1); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if d.reason[ReasonNoSpace] == 0 {
		t.Fatalf("a %d-byte disk never filled up", disk.quota)
	}
	disk.quota = 10 << 20 // space is back: 10 MiB free, 1 MiB configured
	before, held := d.n, s.Bytes()
	const more = 700 // 700 KB more: within the limit, far beyond what the full disk held
	for j := 0; j < more; j++ {
		if err := s.Append(rec(i+j), 1); err != nil {
			t.Fatalf("record %d after the space came back: %v", i+j, err)
		}
	}
	if d.n != before {
		t.Errorf("%d records dropped (%v) after the space came back, within the configured limit", d.n-before, d.reason)
	}
	if got, want := s.Bytes(), held+more*(1000+headerSize); got != want {
		t.Errorf("the spool holds %d bytes, want %d", got, want)
	}
}

// On a 2 MiB disk with the default 1 GiB limit, the disk filling up drops only the oldest
// segment(s), not the whole backlog: a segment is at most an eighth of what the disk can hold.
// The disk is a real tmpfs (where it can be mounted) and the fault-injecting one.
func TestSmallDiskDropsOnlyTheOldest(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T, d *drops) *Spool
	}{
		{"tmpfs", func(t *testing.T, d *drops) *Spool {
			s, err := Open(spooltest.MountTmpfs(t, "2m"), 1<<30, Options{OnDrop: d.fn()})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"injected", func(t *testing.T, d *drops) *Spool {
			dir := t.TempDir()
			s, err := Open(dir, 1<<30, Options{OnDrop: d.fn(), Disk: &smallDisk{t: t, dir: dir, quota: 2 << 20}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d drops
			s := tc.open(t, &d)
			defer s.Close()
			const n, size = 210, 10_000 // 2.1 MB: the disk fills up once, near the end
			failed := 0
			for i := 0; i < n; i++ {
				if err := s.Append([]byte(fmt.Sprintf("%0*d", size, i)), 1); err != nil {
					failed++
				}
			}
			got := drain(t, s)
			t.Logf("%d appended on a 2 MiB disk: %d read back, %d dropped (%v), %d appends failed", n, len(got), d.n, d.reason, failed)
			if d.reason[ReasonNoSpace] == 0 {
				t.Fatalf("the disk never filled up: %v", d.reason)
			}
			if failed != 0 || d.n+len(got) != n {
				t.Errorf("%d read + %d dropped + %d failed: want every record read or dropped, none failed", len(got), d.n, failed)
			}
			// An eighth of the disk is 26 records: allow two segments.
			if d.n > n/4 {
				t.Errorf("%d of %d records dropped: more than the oldest segments", d.n, n)
			}
			for k, r := range got {
				if i, err := strconv.Atoi(r); err != nil || i != d.n+k {
					t.Fatalf("record %d read back is %.8s…, want %d: the oldest are dropped, the rest kept in order", k, r, d.n+k)
				}
			}
		})
	}
}

// A record is at most an eighth of the limit and at most 8 MiB, whatever the disk: the
// publisher splits batches to that.
func TestMaxRecord(t *testing.T) {
	for _, tc := range []struct{ limit, want int64 }{
		{8 << 10, 1<<10 - headerSize},
		{1 << 20, 128<<10 - headerSize},
		{1 << 30, 8<<20 - headerSize}, // the default limit: 128 MiB segments were the whole backlog of a small disk
	} {
		s, err := Open(t.TempDir(), tc.limit, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.MaxRecord(); got != tc.want {
			t.Errorf("limit %d: MaxRecord %d, want %d", tc.limit, got, tc.want)
		}
		if err := s.Append(make([]byte, tc.want+1), 1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("limit %d: a record of %d bytes: %v, want ErrTooLarge", tc.limit, tc.want+1, err)
		}
		s.Close()
	}
}

// failingDisk fails every segment write with EIO while failing is set.
type failingDisk struct{ failing bool }

func (d *failingDisk) Free(string) int64 { return -1 }

func (d *failingDisk) Create(path string) (SegmentWriter, error) {
	f, err := createFile(path)
	if err != nil {
		return nil, err
	}
	return &failingWriter{f: f, d: d}, nil
}

type failingWriter struct {
	f SegmentWriter
	d *failingDisk
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.d.failing {
		n, _ := w.f.Write(p[:len(p)/2]) // a torn write
		return n, syscall.EIO
	}
	return w.f.Write(p)
}

func (w *failingWriter) Close() error { return w.f.Close() }

// A write error other than a full disk fails that Append alone: nothing spooled is dropped
// (dropping would free nothing), and once the disk works again so does the spool.
func TestWriteErrorKeepsTheBacklog(t *testing.T) {
	disk := &failingDisk{}
	var d drops
	s, err := Open(t.TempDir(), 1<<20, Options{OnDrop: d.fn(), Disk: disk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 10 {
		if err := s.Append([]byte{byte('a' + i)}, 1); err != nil {
			t.Fatal(err)
		}
	}
	disk.failing = true
	for i := range 3 {
		if err := s.Append([]byte{'x'}, 1); !errors.Is(err, syscall.EIO) {
			t.Errorf("append %d on a failing disk: %v, want EIO", i, err)
		}
	}
	disk.failing = false
	if err := s.Append([]byte{'z'}, 1); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, s); fmt.Sprint(got) != "[a b c d e f g h i j z]" || d.n != 0 {
		t.Errorf("read back %v with %d dropped (%v), want a…j and z, none dropped", got, d.n, d.reason)
	}
}
