package partitioner

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/bufpool"
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
// A frame from an Encoder may hold its bytes in a buffer of the encoder's pool. Such a frame is
// counted: it comes with one reference, its owner's, and whoever reads its bytes later than the
// owner's Release (a transport writing them out) takes one with Retain and drops it with Release.
// When the last is dropped the buffer goes back to the pool, for a frame encoded later, so nobody
// may read Header or Body after their last Release. A frame that is never released is left to the
// garbage collector, which is always safe; so is Retain and Release on a frame that is not pooled.
type Frame struct {
	Header []byte // IPC message metadata (FlightData.DataHeader)
	Body   []byte // IPC message body (FlightData.DataBody)
	Rows   int64
	Span   Span

	// pool and buf are set for a pooled frame: buf holds Header and Body, refs counts references.
	pool *bufpool.Pool
	buf  []byte
	refs atomic.Int32
}

// Size is the frame's encoded size in bytes.
func (f *Frame) Size() int { return len(f.Header) + len(f.Body) }

// Pooled reports whether the frame's bytes return to a pool on its last Release.
func (f *Frame) Pooled() bool { return f.pool != nil }

// Retain adds a reference to the frame's bytes.
func (f *Frame) Retain() {
	if f.pool != nil {
		f.refs.Add(1)
	}
}

// Release drops a reference to the frame's bytes; the last returns a pooled frame's buffer to its
// pool. Releasing more often than the frame was retained (plus once) panics: it would hand the same
// buffer to two frames.
func (f *Frame) Release() {
	if f.pool == nil {
		return
	}
	switch n := f.refs.Add(-1); {
	case n == 0:
		buf := f.buf
		f.buf = nil
		f.pool.Free(buf)
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
