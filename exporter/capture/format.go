// Package capture is the capture file format and its recorder: what NVML returned to the nvml
// source, tick by tick. Package replay plays a capture back through the same source, so a
// capture from a real GPU node replays on any machine.
//
// File format, version 1: the line "SLICEMETER-CAPTURE 1\n", then a gzip stream of JSON lines:
// first a Header, then one Frame per NVML read (the calls made while opening, then one per
// tick), each call with the object it was made on, the function and its arguments, NVML's
// return code and the values returned.
package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Magic is the first line of every capture file; its number is the format version.
const Magic = "SLICEMETER-CAPTURE 1\n"

// Header describes a capture.
type Header struct {
	Version    int    `json:"version"`
	Node       string `json:"node"`
	IntervalNs int64  `json:"interval_ns"`
	Source     string `json:"source"` // what was recorded: "nvml" or "sim"
	// RediscoverNs is the nvml source's rediscovery period: replay must ask the same questions.
	RediscoverNs int64 `json:"rediscover_ns"`
}

// Frame is the calls of one read: Open (Tick false) or one tick at TNs (Unix ns).
type Frame struct {
	Tick  bool   `json:"tick,omitempty"`
	TNs   int64  `json:"t"`
	Calls []Call `json:"c"`
}

// Call is one NVML call: object ("lib", "gpu0", "gpu0/mig1", "gpu1/vgpu2", …), function with
// its significant arguments ("GetClockInfo:1"), return code and the JSON of the values.
type Call struct {
	Obj    string          `json:"o"`
	Fn     string          `json:"f"`
	Ret    int32           `json:"r"`
	Values json.RawMessage `json:"v,omitempty"`
}

// The values of calls whose NVML types do not marshal as they are (C strings, handles, fixed
// arrays with unused slots).

// GPMMetric is a GPM result without the C strings of its description.
type GPMMetric struct {
	ID    uint32  `json:"id"`
	Ret   uint32  `json:"r"`
	Value float64 `json:"v"`
}

// Event is an event with its device named by object.
type Event struct {
	Device    string `json:"device"`
	EventType uint64 `json:"type"`
	EventData uint64 `json:"data"`
	GI        uint32 `json:"gi"`
	CI        uint32 `json:"ci"`
}

// SchedulerLog is a scheduler log without its unused slots.
type SchedulerLog struct {
	EngineID  uint32                          `json:"engine"`
	Policy    uint32                          `json:"policy"`
	AvgFactor uint32                          `json:"avg"`
	Timeslice uint32                          `json:"timeslice"`
	Entries   []nvml.VgpuSchedulerLogEntry_v2 `json:"entries"`
}

// VgpuRef names a vGPU instance in a capture, with its numeric NVML handle.
type VgpuRef struct {
	Obj    string `json:"obj"`
	Handle uint32 `json:"handle"`
}

// Writer writes a capture file.
type Writer struct {
	f   *os.File
	gz  *gzip.Writer
	enc *json.Encoder
}

// Create starts a capture file.
func Create(path string, h Header) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the capture file: %w", err)
	}
	if _, err := f.WriteString(Magic); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing the capture file %s: %w", path, err)
	}
	gz := gzip.NewWriter(f)
	w := &Writer{f: f, gz: gz, enc: json.NewEncoder(gz)}
	h.Version = 1
	if err := w.enc.Encode(h); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing the capture header to %s: %w", path, err)
	}
	return w, nil
}

// WriteFrame appends a frame.
func (w *Writer) WriteFrame(fr *Frame) error {
	if err := w.enc.Encode(fr); err != nil {
		return fmt.Errorf("writing a capture frame: %w", err)
	}
	return nil
}

// Close ends the gzip stream and the file.
func (w *Writer) Close() error {
	return errors.Join(w.gz.Close(), w.f.Close())
}

// countingReader counts the compressed bytes read, so a corrupt stream can be located.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Reader reads a capture file frame by frame.
type Reader struct {
	path   string
	f      *os.File
	raw    *countingReader
	lines  *bufio.Reader
	offset int64 // of the next line in the decompressed stream
	Header Header
}

// Open opens a capture file and reads its header. Errors name the file and the offset.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the capture file: %w", err)
	}
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte(Magic)) {
		f.Close()
		return nil, fmt.Errorf("capture %s: offset 0: not a slicemeter capture (want the line %q)", path, Magic[:len(Magic)-1])
	}
	raw := &countingReader{r: bufio.NewReader(f), n: int64(len(Magic))}
	gz, err := gzip.NewReader(raw)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("capture %s: offset %d: compressed stream: %w", path, len(Magic), err)
	}
	r := &Reader{path: path, f: f, raw: raw, lines: bufio.NewReaderSize(gz, 1<<20)}
	if err := r.next(&r.Header); err != nil {
		f.Close()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("capture %s: no header", path)
		}
		return nil, err
	}
	if r.Header.Version != 1 {
		f.Close()
		return nil, fmt.Errorf("capture %s: header: version %d, this build reads version 1", path, r.Header.Version)
	}
	if r.Header.IntervalNs <= 0 {
		f.Close()
		return nil, fmt.Errorf("capture %s: header: interval_ns %d, expected > 0", path, r.Header.IntervalNs)
	}
	return r, nil
}

// Next returns the next frame, or io.EOF at the end.
func (r *Reader) Next() (*Frame, error) {
	var fr Frame
	if err := r.next(&fr); err != nil {
		return nil, err
	}
	return &fr, nil
}

func (r *Reader) next(v any) error {
	line, err := r.lines.ReadBytes('\n')
	at := r.offset
	r.offset += int64(len(line))
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return io.EOF
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("capture %s: decompressed offset %d: truncated frame", r.path, at)
		}
		return fmt.Errorf("capture %s: compressed offset %d: %w", r.path, r.raw.n, err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("capture %s: decompressed offset %d: bad frame: %w", r.path, at, err)
	}
	return nil
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }
