// Package partitioner cuts record batches into Flight frames that fit a target's message limit, and
// bounds the bytes in flight between the readers and the wire.
//
// API CONTRACT (written before the implementation; the implementer fills in the bodies and may add
// to it, but must not change these signatures without updating every caller).
//
// A Frame is one encoded IPC record batch message (the DataHeader and DataBody of a FlightData),
// measured by its encoded size. Each frame remembers which source rows it carries (its Span) so that
// acknowledgements can be recorded per file, unit and row range.
package partitioner

import (
	"context"
	"errors"

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

// Frame is one encoded record batch message.
type Frame struct {
	Header []byte // IPC message metadata (FlightData.DataHeader)
	Body   []byte // IPC message body (FlightData.DataBody)
	Rows   int64
	Span   Span
}

// Size is the frame's encoded size in bytes.
func (f *Frame) Size() int { return len(f.Header) + len(f.Body) }

// Compression is the IPC body compression of frames.
type Compression int

// The compressions.
const (
	CompressionNone Compression = iota
	CompressionLZ4
	CompressionZSTD
)

// EncoderOption configures an Encoder.
type EncoderOption func(*encoderConfig)

type encoderConfig struct{}

// WithCompression sets the body compression. Default none.
func WithCompression(c Compression) EncoderOption { panic("partitioner: not implemented") }

// WithAllocator sets the allocator for temporary buffers. Default memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) EncoderOption { panic("partitioner: not implemented") }

// Encoder encodes batches of one schema into frames of at most maxFrameBytes. It is safe for
// concurrent use.
type Encoder struct{}

// NewEncoder returns an encoder for batches of schema.
func NewEncoder(schema *arrow.Schema, maxFrameBytes int, opts ...EncoderOption) (*Encoder, error) {
	panic("partitioner: not implemented")
}

// SchemaMessage returns the IPC schema message (the DataHeader of a DoPut's first FlightData).
func (e *Encoder) SchemaMessage() []byte { panic("partitioner: not implemented") }

// Encode cuts rec into frames no larger than the limit and calls emit with each, in row order; span
// locates rec's first row, and each frame's Span is advanced by the rows before it. A row that alone
// exceeds the limit is an error wrapping ErrRowTooLarge. The caller keeps ownership of rec.
func (e *Encoder) Encode(rec arrow.RecordBatch, span Span, emit func(*Frame) error) error {
	panic("partitioner: not implemented")
}

// Decode turns a frame back into a record batch (used to re-slice a partially acknowledged frame).
func (e *Encoder) Decode(f *Frame) (arrow.RecordBatch, error) { panic("partitioner: not implemented") }

// Budget bounds the bytes in flight. It is safe for concurrent use.
type Budget struct{}

// NewBudget returns a budget of max bytes.
func NewBudget(max int64) *Budget { panic("partitioner: not implemented") }

// Acquire waits until n bytes fit, or ctx ends. A request larger than the whole budget is admitted
// when nothing else is in flight, so it cannot deadlock.
func (b *Budget) Acquire(ctx context.Context, n int64) error { panic("partitioner: not implemented") }

// Release returns n bytes.
func (b *Budget) Release(n int64) { panic("partitioner: not implemented") }

// InUse returns the bytes currently held.
func (b *Budget) InUse() int64 { panic("partitioner: not implemented") }
