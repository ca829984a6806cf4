// Package spool is the exporter's bounded disk queue for Kafka outages (VictoriaMetrics'
// lib/persistentqueue is the model): records are appended to segment files and read back in
// order; when the size limit is reached the oldest segment is dropped and its records counted.
package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const (
	headerSize = 12 // length, CRC-32C, weight
	segSuffix  = ".seg"
	readerFile = "reader"
	// segmentsPerLimit: a segment holds at most 1/8 of the limit (and of what the disk can
	// hold), so a drop loses at most that.
	segmentsPerLimit = 8
	// maxSegment caps a segment whatever the limit: with the default 1 GiB, a segment of 128 MiB
	// would be the whole backlog of a small disk.
	maxSegment = 8 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrTooLarge is returned for a record bigger than a segment.
var ErrTooLarge = errors.New("record larger than a spool segment")

// Reasons a record is dropped, passed to Drop.
const (
	ReasonFull    = "spool_full"     // the oldest segment, to stay within the size limit
	ReasonCorrupt = "spool_corrupt"  // a record whose CRC does not match (a torn write)
	ReasonNoSpace = "spool_no_space" // the oldest data, to make room after a failed write (disk full)
)

// SegmentWriter is what the spool appends to a segment through: an *os.File opened to append
// (tests inject a full disk).
type SegmentWriter interface {
	Write(p []byte) (int, error)
	Close() error
}

// Disk is where the spool writes its segments: the file system (FileSystem), or in tests a
// small or failing one.
type Disk interface {
	// Create opens a segment file for appending, creating or emptying it.
	Create(path string) (SegmentWriter, error)
	// Free is the space left for files in dir, in bytes; negative where it is not known.
	Free(dir string) int64
}

// FileSystem is the Disk of the real file system.
type FileSystem struct{}

// Create opens path to append, creating or emptying it.
func (FileSystem) Create(path string) (SegmentWriter, error) { return createFile(path) }

// Free is what statfs says an unprivileged process may still write in dir (-1: unknown).
func (FileSystem) Free(dir string) int64 { return freeBytes(dir) }

func createFile(path string) (SegmentWriter, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
}

func appendFile(path string) (SegmentWriter, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
}

// Drop is called for every record dropped to stay within the size limit (weight: what the
// record stood for, e.g. samples), and for every corrupt record skipped.
type Drop func(weight uint32, reason string)

// Spool is a FIFO of byte records on disk. It is safe for concurrent use.
type Spool struct {
	dir      string
	maxBytes int64 // the configured limit: a full disk never lowers it
	recMax   int64 // the largest record with its header: a segment's size at most
	onDrop   Drop
	disk     Disk
	injected bool // disk is not the file system: segments are never reopened
	// segTarget is the size at which the segment being written is rotated: recMax, or less
	// where the disk holds less, so that making room drops an eighth of the data, not all.
	segTarget int64
	// diskFull: a write failed while the spool held diskBytes; segments are then kept to an
	// eighth of that. Cleared once the spool drains or holds more (the space is back).
	diskFull  bool
	diskBytes int64

	mu       sync.Mutex
	segs     []*segment // oldest first; the last is written to
	readSeg  uint64
	readOff  int64
	bytes    int64 // on disk, unread and read-but-not-removed
	records  int   // unread
	w        SegmentWriter
	reader   *os.File // the persisted read position
	peekNext int64    // offset after the record returned by Peek
	// Where the record Peek returned lies, for dropOldest to tell when it drops it (flight).
	peekSeg uint64
	peekOff int64
	flight  inFlight
}

type segment struct {
	id      uint64
	size    int64
	records int // unread records in it
}

// Options are the spool's optional parts; the zero value is a spool on the file system that
// drops records silently.
type Options struct {
	// OnDrop is told of every record dropped or skipped (nil: nobody).
	OnDrop Drop
	// Disk is where segments are written (nil: FileSystem; tests inject a small or failing one).
	Disk Disk
}

// Open opens (or creates) the spool in dir, limited to maxBytes on disk.
func Open(dir string, maxBytes int64, opts Options) (*Spool, error) {
	disk, onDrop := opts.Disk, opts.OnDrop
	injected := disk != nil
	if !injected {
		disk = FileSystem{}
	}
	if maxBytes < segmentsPerLimit*1024 {
		return nil, fmt.Errorf("spool %s: size limit %d bytes is below the minimum %d", dir, maxBytes, segmentsPerLimit*1024)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the spool directory: %w", err)
	}
	if onDrop == nil {
		onDrop = func(uint32, string) {}
	}
	recMax := min(maxBytes/segmentsPerLimit, maxSegment)
	s := &Spool{dir: dir, maxBytes: maxBytes, recMax: recMax, segTarget: recMax, onDrop: onDrop, disk: disk, injected: injected}
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("opening the spool %s: %w", dir, err)
	}
	s.segTarget = s.target()
	return s, nil
}

func (s *Spool) segPath(id uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%016d%s", id, segSuffix))
}

// load finds the segments and the read position, and counts the unread records.
func (s *Spool) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	var ids []uint64
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), segSuffix); ok {
			id, err := strconv.ParseUint(name, 10, 64)
			if err == nil {
				ids = append(ids, id)
			}
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	s.reader, err = os.OpenFile(filepath.Join(s.dir, readerFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	var pos [16]byte
	if n, _ := s.reader.ReadAt(pos[:], 0); n == 16 {
		s.readSeg, s.readOff = binary.LittleEndian.Uint64(pos[:8]), int64(binary.LittleEndian.Uint64(pos[8:]))
	}
	for _, id := range ids {
		if id < s.readSeg {
			_ = os.Remove(s.segPath(id)) // fully read before a crash
			continue
		}
		seg := &segment{id: id}
		from := int64(0)
		if id == s.readSeg {
			from = s.readOff
		}
		if err := s.scan(seg, from); err != nil {
			return err
		}
		s.segs = append(s.segs, seg)
		s.bytes += seg.size
		s.records += seg.records
	}
	if len(s.segs) == 0 {
		s.readSeg, s.readOff = s.readSeg+1, 0
		return s.newSegment(s.readSeg)
	}
	if s.segs[0].id != s.readSeg {
		s.readSeg, s.readOff = s.segs[0].id, 0
	}
	last := s.segs[len(s.segs)-1]
	if !s.injected {
		s.w, err = appendFile(s.segPath(last.id))
		return err
	}
	// An injected writer starts a new segment rather than reopening one.
	return s.newSegment(last.id + 1)
}

// scan counts a segment's records from offset from and truncates a torn tail (a crash while
// appending): what is after it was never acknowledged.
func (s *Spool) scan(seg *segment, from int64) error {
	f, err := os.Open(s.segPath(seg.id))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	off := from
	var h [headerSize]byte
	for {
		if _, err := f.ReadAt(h[:], off); err != nil {
			break
		}
		n := int64(binary.LittleEndian.Uint32(h[:4]))
		if off+headerSize+n > st.Size() {
			break
		}
		off += headerSize + n
		seg.records++
	}
	seg.size = off
	if off < st.Size() {
		return os.Truncate(s.segPath(seg.id), off)
	}
	return nil
}

func (s *Spool) newSegment(id uint64) error {
	if s.w != nil {
		if err := s.w.Close(); err != nil {
			return err
		}
	}
	s.w = nil
	f, err := s.disk.Create(s.segPath(id))
	if err != nil {
		return err
	}
	s.w = f
	s.segs = append(s.segs, &segment{id: id})
	s.segTarget = s.target()
	return nil
}

// target is the size of a new segment: an eighth of the limit (recMax), of what the disk can
// hold (what is free and what the spool holds already) and, while the disk is full, of what
// it held then.
func (s *Spool) target() int64 {
	t := s.recMax
	if free := s.disk.Free(s.dir); free >= 0 {
		t = min(t, (free+s.bytes)/segmentsPerLimit)
	}
	if s.diskFull {
		t = min(t, s.diskBytes/segmentsPerLimit)
	}
	return t
}

// MaxRecord is the largest record Append takes, in bytes: a segment's size less the record's
// header. It depends on the size limit only, not on the disk's state.
func (s *Spool) MaxRecord() int64 { return s.recMax - headerSize }

// Append adds a record at the end. When the spool would exceed its limit, the oldest
// segments are dropped (and reported through Drop) first.
func (s *Spool) Append(rec []byte, weight uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	size := int64(headerSize + len(rec))
	if size > s.recMax {
		return fmt.Errorf("spool %s: %w (%d > %d bytes)", s.dir, ErrTooLarge, size, s.recMax)
	}
	// A record larger than the target goes alone into a segment.
	last := s.segs[len(s.segs)-1]
	if last.size > 0 && last.size+size > s.segTarget {
		if err := s.newSegment(last.id + 1); err != nil {
			return fmt.Errorf("spool %s: starting a segment: %w", s.dir, err)
		}
	}
	for s.bytes+size > s.maxBytes && len(s.segs) > 1 {
		if err := s.dropOldest(ReasonFull); err != nil {
			return err
		}
	}
	buf := make([]byte, size)
	binary.LittleEndian.PutUint32(buf[0:], uint32(len(rec)))
	binary.LittleEndian.PutUint32(buf[4:], crc32.Checksum(rec, crcTable))
	binary.LittleEndian.PutUint32(buf[8:], weight)
	copy(buf[headerSize:], rec)
	// Disk full: cut the torn tail, drop the oldest data to make room (rotating the segment
	// being written if it is the only one) and try again, until the record fits or there is
	// nothing left to drop. Any other write error: the failed segment is rotated, nothing is
	// dropped (it would free nothing), and the write tried once more. Whatever the outcome,
	// the spool stays consistent and the next Append tries again: no restart needed.
	for err, tries := s.write(buf), 1; err != nil; err, tries = s.write(buf), tries+1 {
		var freed bool
		var rerr error
		if noSpace(err) {
			freed, rerr = s.recover()
		} else if tries == 1 {
			freed, rerr = true, s.rotate()
		}
		if rerr != nil {
			return fmt.Errorf("spool %s: appending: %w (recovering: %v)", s.dir, err, rerr)
		}
		if !freed {
			if cerr := s.cutTorn(); cerr != nil {
				return fmt.Errorf("spool %s: appending: %w (cutting the torn tail: %v)", s.dir, err, cerr)
			}
			return fmt.Errorf("spool %s: appending: %w", s.dir, err)
		}
	}
	last = s.segs[len(s.segs)-1]
	last.size += size
	last.records++
	s.bytes += size
	s.records++
	if s.diskFull && s.bytes > s.diskBytes+s.diskBytes/segmentsPerLimit {
		s.diskFull = false // the disk holds more than when it was full: the space is back
	}
	return nil
}

// write appends buf to the segment being written.
func (s *Spool) write(buf []byte) error {
	if s.w == nil { // a segment could not be started: try again
		if err := s.newSegment(s.segs[len(s.segs)-1].id + 1); err != nil {
			return err
		}
	}
	_, err := s.w.Write(buf)
	return err
}

// cutTorn truncates what a failed write left after the last whole record of the segment
// being written (its writer appends, so the next write follows the last whole record).
func (s *Spool) cutTorn() error {
	last := s.segs[len(s.segs)-1]
	if err := os.Truncate(s.segPath(last.id), last.size); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// noSpace says whether a write failed for want of space (the disk, or the user's quota).
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// rotate follows a write that failed for another reason than space: the torn tail is cut and,
// unless it is empty, the segment being written is closed and a new one started.
func (s *Spool) rotate() error {
	if err := s.cutTorn(); err != nil {
		return err
	}
	if last := s.segs[len(s.segs)-1]; last.size > 0 {
		return s.newSegment(last.id + 1)
	}
	return nil
}

// recover follows a write that failed for want of space: the torn tail is cut, the disk marked full at what the spool
// holds (new segments are an eighth of that, so that later drops take an eighth, not all; the
// size limit stays), and the oldest segment dropped (its unread records reported as
// ReasonNoSpace); a spool of one segment first starts a new one, so that the one holding the
// data can go. freed is false when there was nothing left to free.
func (s *Spool) recover() (freed bool, err error) {
	if err := s.cutTorn(); err != nil {
		return false, err
	}
	if s.records > 0 {
		s.diskFull, s.diskBytes = true, s.bytes
		s.segTarget = min(s.segTarget, s.target()) // the segment being written too
	}
	switch {
	case len(s.segs) > 1:
		return true, s.dropOldest(ReasonNoSpace)
	case s.records == 0:
		held := s.bytes
		if err := s.reclaim(); err != nil {
			return false, err
		}
		return s.bytes < held, nil
	}
	if err := s.newSegment(s.segs[0].id + 1); err != nil {
		return false, err
	}
	return true, s.dropOldest(ReasonNoSpace)
}

// reclaim empties the segment being written once everything in it has been read, so that a
// drained spool gives its disk space back instead of growing to a segment's size.
func (s *Spool) reclaim() error {
	if len(s.segs) != 1 || s.records != 0 {
		return nil
	}
	seg := s.segs[0]
	if seg.size == 0 {
		return nil
	}
	// The read position first: a crash in between sends the read records again (at least once).
	s.readOff, s.peekNext = 0, 0
	if err := s.saveReader(); err != nil {
		return err
	}
	if err := os.Truncate(s.segPath(seg.id), 0); err != nil {
		return fmt.Errorf("spool %s: reclaiming a read segment: %w", s.dir, err)
	}
	s.bytes -= seg.size
	seg.size = 0
	// Drained: whatever the disk held when it was full, segments go back to their size.
	s.diskFull, s.segTarget = false, s.target()
	return nil
}

// dropOldest removes the oldest segment, reporting each unread record in it.
func (s *Spool) dropOldest(reason string) error {
	seg := s.segs[0]
	from := int64(0)
	if seg.id == s.readSeg {
		from = s.readOff
	}
	f, err := os.Open(s.segPath(seg.id))
	if err == nil {
		var h [headerSize]byte
		for off := from; off < seg.size; {
			if _, err := f.ReadAt(h[:], off); err != nil {
				break
			}
			if w := binary.LittleEndian.Uint32(h[8:]); s.peekNext > s.readOff && seg.id == s.peekSeg && off == s.peekOff {
				s.flight.drop(w, reason) // in flight: Pop or the next Peek decides
			} else {
				s.onDrop(w, reason)
			}
			off += headerSize + int64(binary.LittleEndian.Uint32(h[:4]))
		}
		f.Close()
	}
	if err := os.Remove(s.segPath(seg.id)); err != nil {
		return fmt.Errorf("spool %s: dropping the oldest segment: %w", s.dir, err)
	}
	s.records -= seg.records
	s.bytes -= seg.size
	s.segs = s.segs[1:]
	s.readSeg, s.readOff, s.peekNext = s.segs[0].id, 0, 0
	return s.saveReader()
}

// Peek returns the oldest unread record and its weight without removing it; ok is false when
// the spool is empty. A corrupt record is skipped and reported through Drop.
func (s *Spool) Peek() (rec []byte, weight uint32, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flight.settle(s.onDrop) // peeked again without a Pop: the earlier record was not delivered
	for s.records > 0 {
		seg := s.segs[0]
		if s.readOff >= seg.size {
			if err := s.advanceSegment(); err != nil {
				return nil, 0, false, err
			}
			continue
		}
		f, err := os.Open(s.segPath(seg.id))
		if err != nil {
			return nil, 0, false, fmt.Errorf("spool %s: reading: %w", s.dir, err)
		}
		var h [headerSize]byte
		_, err = f.ReadAt(h[:], s.readOff)
		n := int64(binary.LittleEndian.Uint32(h[:4]))
		var body []byte
		if err == nil {
			body = make([]byte, n)
			_, err = f.ReadAt(body, s.readOff+headerSize)
		}
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, false, fmt.Errorf("spool %s: reading segment %d at offset %d: %w", s.dir, seg.id, s.readOff, err)
		}
		w := binary.LittleEndian.Uint32(h[8:])
		if err != nil || crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(h[4:]) {
			// Corrupt: nothing after it in this segment can be trusted.
			s.onDrop(w, ReasonCorrupt)
			s.records -= seg.records
			seg.records = 0
			s.readOff = seg.size
			continue
		}
		s.peekNext = s.readOff + headerSize + n
		s.peekSeg, s.peekOff = seg.id, s.readOff
		return body, w, true, nil
	}
	return nil, 0, false, nil
}

// Pop removes the record returned by the latest Peek, once it was delivered; if the spool
// dropped it meanwhile to make room, there is nothing left to remove (and it is not counted as
// dropped: it was delivered).
func (s *Spool) Pop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flight.delivered() {
		return nil
	}
	if s.peekNext <= s.readOff || s.records == 0 {
		return errors.New("spool: Pop without a record from Peek")
	}
	s.readOff = s.peekNext
	s.segs[0].records--
	s.records--
	if s.readOff >= s.segs[0].size && len(s.segs) > 1 {
		return s.advanceSegment()
	}
	if s.records == 0 {
		return s.reclaim()
	}
	return s.saveReader()
}

func (s *Spool) advanceSegment() error {
	if len(s.segs) == 1 {
		return nil // the segment being written: nothing more to read yet
	}
	seg := s.segs[0]
	if err := os.Remove(s.segPath(seg.id)); err != nil {
		return fmt.Errorf("spool %s: removing a read segment: %w", s.dir, err)
	}
	s.bytes -= seg.size
	s.segs = s.segs[1:]
	s.readSeg, s.readOff = s.segs[0].id, 0
	return s.saveReader()
}

func (s *Spool) saveReader() error {
	var pos [16]byte
	binary.LittleEndian.PutUint64(pos[:8], s.readSeg)
	binary.LittleEndian.PutUint64(pos[8:], uint64(s.readOff))
	if _, err := s.reader.WriteAt(pos[:], 0); err != nil {
		return fmt.Errorf("spool %s: saving the read position: %w", s.dir, err)
	}
	return nil
}

// Len is the number of unread records.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records
}

// Bytes is the spool's size on disk.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Close closes the spool's files; its records stay on disk for the next Open.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flight.settle(s.onDrop)
	var werr error
	if s.w != nil {
		werr = s.w.Close()
	}
	return errors.Join(werr, s.reader.Close())
}
