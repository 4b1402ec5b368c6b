package partitioner

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultMaxFrameBytes is the default frame limit: 2 MiB, as the Zerobus SDKs split.
const DefaultMaxFrameBytes = 2 << 20

// ErrRowTooLarge means a single row encodes to more than the frame limit.
var ErrRowTooLarge = errors.New("row larger than the frame limit")

// Span locates a frame's rows in the source: rows [Row, Row+Frame.Rows) of unit Unit of file File
// (File indexes the caller's file list).
type Span struct {
	File int
	Unit int
	Row  int64
}

// String renders the span for error messages.
func (s Span) String() string {
	return fmt.Sprintf("file #%d unit %d row %d", s.File, s.Unit, s.Row)
}

// Frame is one encoded record batch message.
//
// A frame from an Encoder does not copy its body: Segments are the batch's own Arrow buffers (and
// the few the IPC encoder made for it, such as rebased offsets), in wire order, and the frame holds
// them. Such a frame is counted: it comes with one reference, its owner's, and whoever reads its
// bytes later than the owner's Release (a transport writing them out) takes one with Retain and drops
// it with Release. When the last is dropped the frame releases the batch and frees the encoder's
// buffers, which may then carry other data, so nobody may read Header or the body after the last
// Release. A frame that is never released leaves its buffers to the garbage collector, which is
// safe, but an allocator that counts (memory.CheckedAllocator) sees them as leaked.
//
// A frame made by hand sets Body, its whole body in one slice, and holds nothing: Retain and Release
// do nothing.
type Frame struct {
	Header []byte // IPC message metadata (FlightData.DataHeader)
	Body   []byte // IPC message body (FlightData.DataBody), when it is one slice; nil for an encoded frame
	Rows   int64
	Span   Span

	// An encoded frame's body is segs, bodyLen bytes in all; hold is what it keeps alive and refs
	// counts references to it.
	segs    [][]byte
	bodyLen int
	hold    *hold
	refs    atomic.Int32
}

// hold is what an encoded frame keeps alive: the batch its body references and the encoder's
// buffers it references, freed to mem on the frame's last Release.
type hold struct {
	rec   arrow.RecordBatch
	mem   memory.Allocator
	frees [][]byte
}

func (h *hold) release() {
	for _, b := range h.frees {
		h.mem.Free(b)
	}
	h.frees = nil
	h.rec.Release()
	h.rec = nil
}

// Size is the frame's encoded size in bytes.
func (f *Frame) Size() int { return len(f.Header) + f.BodyLen() }

// BodyLen is the length of the body.
func (f *Frame) BodyLen() int {
	if f.segs == nil {
		return len(f.Body)
	}
	return f.bodyLen
}

// Segments returns the body as consecutive pieces, in order (one for a frame made with Body). The
// pieces are the frame's: do not modify them, nor read them after the frame's last Release.
func (f *Frame) Segments() [][]byte {
	if f.segs == nil {
		return [][]byte{f.Body}
	}
	return f.segs
}

// AppendBody appends the body to b and returns the result.
func (f *Frame) AppendBody(b []byte) []byte {
	b = slices.Grow(b, f.BodyLen())
	for _, s := range f.Segments() {
		b = append(b, s...)
	}
	return b
}

// Held reports whether the frame holds buffers that its last Release gives back.
func (f *Frame) Held() bool { return f.hold != nil }

// Retain adds a reference to the frame's buffers.
func (f *Frame) Retain() {
	if f.hold != nil {
		f.refs.Add(1)
	}
}

// Release drops a reference to the frame's buffers; the last releases them. Releasing more often
// than the frame was retained (plus once) panics: it would free the same buffers twice.
func (f *Frame) Release() {
	if f.hold == nil {
		return
	}
	switch n := f.refs.Add(-1); {
	case n == 0:
		f.hold.release()
	case n < 0:
		panic(fmt.Sprintf("partitioner: frame at %s released once more than retained", f.Span))
	}
}

// Compression is the IPC body compression of frames.
type Compression int

// The compressions.
const (
	CompressionNone Compression = iota
	CompressionLZ4
	CompressionZSTD
)

// String returns "none", "lz4" or "zstd".
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionLZ4:
		return "lz4"
	case CompressionZSTD:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

// ParseCompression reads "none" (or ""), "lz4" or "zstd".
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none":
		return CompressionNone, nil
	case "lz4", "lz4_frame":
		return CompressionLZ4, nil
	case "zstd":
		return CompressionZSTD, nil
	}
	return 0, fmt.Errorf("unknown compression %q, want none, lz4 or zstd", s)
}

// EncoderOption configures an Encoder.
type EncoderOption func(*encoderConfig)

type encoderConfig struct {
	compression Compression
	mem         memory.Allocator
}

func newEncoderConfig(opts []EncoderOption) encoderConfig {
	cfg := encoderConfig{compression: CompressionNone, mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// WithCompression sets the body compression. Default none. An unknown value makes NewEncoder fail.
func WithCompression(c Compression) EncoderOption {
	return func(cfg *encoderConfig) { cfg.compression = c }
}

// WithAllocator sets the allocator for temporary buffers (encoding scratch and the buffers of
// decompressed batches returned by Decode). Default memory.DefaultAllocator; nil keeps the default.
func WithAllocator(mem memory.Allocator) EncoderOption {
	return func(cfg *encoderConfig) {
		if mem != nil {
			cfg.mem = mem
		}
	}
}
