package partitioner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
)

// Sizing factors. After a frame of k rows encoded to s bytes, the next guess is k*grow*limit/s rows;
// after a try that was too large, k*shrink*limit/s. Both stay below 1 so that rows of uneven width
// rarely need a second try.
const (
	growFactor   = 0.95
	shrinkFactor = 0.9
)

// Encoder encodes batches of one schema into frames of at most maxFrameBytes. It is safe for
// concurrent use.
type Encoder struct {
	schema    *arrow.Schema
	max       int
	cfg       encoderConfig
	ipcOpts   []ipc.Option
	schemaMsg []byte

	writers sync.Pool // *frameWriter

	// bytesPerRow is the float64 bits of the encoded bytes per row of the last frame, the first guess
	// for the next batch (0 until a frame was encoded).
	bytesPerRow atomic.Uint64
}

// NewEncoder returns an encoder for batches of schema. It fails when maxFrameBytes is not positive, the
// compression is unknown, or the schema holds a dictionary-encoded field (at any depth).
func NewEncoder(schema *arrow.Schema, maxFrameBytes int, opts ...EncoderOption) (*Encoder, error) {
	if schema == nil {
		return nil, errors.New("partitioner: nil schema")
	}
	if maxFrameBytes <= 0 {
		return nil, fmt.Errorf("partitioner: frame limit %d bytes, want a positive number", maxFrameBytes)
	}
	cfg := newEncoderConfig(opts)
	e := &Encoder{schema: schema, max: maxFrameBytes, cfg: cfg}
	e.ipcOpts = []ipc.Option{ipc.WithSchema(schema)}
	switch cfg.compression {
	case CompressionNone:
	case CompressionLZ4:
		e.ipcOpts = append(e.ipcOpts, ipc.WithLZ4())
	case CompressionZSTD:
		e.ipcOpts = append(e.ipcOpts, ipc.WithZstd())
	default:
		return nil, fmt.Errorf("partitioner: unknown compression %d", int(cfg.compression))
	}
	for _, f := range schema.Fields() {
		if path, ok := findDictionary(f.Name, f.Type); ok {
			return nil, fmt.Errorf("partitioner: column %q: field %s is dictionary-encoded; frames carry no "+
				"dictionaries, so decode it to its value type first", f.Name, path)
		}
	}
	p := ipc.GetSchemaPayload(schema, cfg.mem)
	meta := p.Meta()
	e.schemaMsg = append([]byte(nil), meta.Bytes()...)
	meta.Release()
	p.Release()
	return e, nil
}

// findDictionary returns the path of the first dictionary type inside dt.
func findDictionary(path string, dt arrow.DataType) (string, bool) {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return path, true
	case arrow.NestedType:
		for _, c := range t.Fields() {
			if p, ok := findDictionary(path+"."+c.Name, c.Type); ok {
				return p, true
			}
		}
	}
	return "", false
}

// Schema returns the schema the encoder was made for.
func (e *Encoder) Schema() *arrow.Schema { return e.schema }

// MaxFrameBytes returns the frame limit.
func (e *Encoder) MaxFrameBytes() int { return e.max }

// SchemaMessage returns the IPC schema message (the DataHeader of a DoPut's first FlightData). The
// returned slice is shared: do not modify it.
func (e *Encoder) SchemaMessage() []byte { return e.schemaMsg }

// Encode cuts rec into frames no larger than the limit and calls emit with each, in row order; span
// locates rec's first row, and each frame's Span is advanced by the rows before it. A row that alone
// exceeds the limit is an error wrapping ErrRowTooLarge. The caller keeps its reference to rec; each
// frame takes one of its own (see Frame), and emit receives the frame's only reference.
//
// A batch without rows yields no frame. An error returned by emit stops Encode and is returned as is.
// A batch whose schema differs from the encoder's is an error.
func (e *Encoder) Encode(rec arrow.RecordBatch, span Span, emit func(*Frame) error) error {
	if rec == nil {
		return fmt.Errorf("partitioner: %s: nil record batch", span)
	}
	if !rec.Schema().Equal(e.schema) {
		return fmt.Errorf("partitioner: %s: batch schema %s does not match the encoder's schema %s",
			span, rec.Schema(), e.schema)
	}
	n := rec.NumRows()
	if n == 0 {
		return nil
	}

	fw := e.getWriter()
	healthy := true
	defer func() {
		if healthy {
			e.writers.Put(fw)
		}
	}()

	bpr := math.Float64frombits(e.bytesPerRow.Load())
	if bpr <= 0 {
		bpr = float64(util.TotalRecordSize(rec)) / float64(n) // whole buffers: a slice over-counts, which only shrinks the first guess
	}
	k := rowsFitting(e.max, bpr, growFactor)
	var off int64
	for off < n {
		k = min(max(k, 1), n-off)
		at := span
		at.Row += off
		f, size, err := fw.encode(rec, off, k, e.max)
		if err != nil {
			healthy = false
			return fmt.Errorf("partitioner: %s: encode %d rows: %w", at, k, err)
		}
		if f == nil {
			if k == 1 {
				return fmt.Errorf("partitioner: %s: %w: the row encodes to %d bytes, the frame limit is %d bytes",
					at, ErrRowTooLarge, size, e.max)
			}
			k = min(k-1, rowsFitting(e.max, float64(size)/float64(k), shrinkFactor))
			continue
		}
		f.Rows = k
		f.Span = at
		e.bytesPerRow.Store(math.Float64bits(float64(size) / float64(k)))
		off += k
		if err := emit(f); err != nil {
			return err
		}
		k = rowsFitting(e.max, float64(size)/float64(k), growFactor)
	}
	return nil
}

// rowsFitting guesses how many rows of bpr bytes fit factor*limit bytes (at least 1).
func rowsFitting(limit int, bpr, factor float64) int64 {
	if bpr <= 0 || math.IsNaN(bpr) {
		return math.MaxInt64
	}
	r := factor * float64(limit) / bpr
	if r >= math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(int64(r), 1)
}

func (e *Encoder) getWriter() *frameWriter {
	if fw, ok := e.writers.Get().(*frameWriter); ok {
		return fw
	}
	fw := &frameWriter{alloc: deferringAllocator{mem: e.cfg.mem}}
	fw.w = ipc.NewWriterWithPayloadWriter(&fw.c, append(e.ipcOpts, ipc.WithAllocator(&fw.alloc))...)
	return fw
}

// frameWriter is an IPC writer whose payloads land in a capture instead of a stream. The writer keeps
// its record encoder and compressors between calls.
type frameWriter struct {
	w     *ipc.Writer
	c     capture
	alloc deferringAllocator
}

// encode encodes rows [off, off+k) of rec. It returns the frame when it fits limit, else nil, and the
// encoded size either way. The frame references rec's buffers and the buffers the IPC writer made for
// it, and holds both (see Frame).
func (fw *frameWriter) encode(rec arrow.RecordBatch, off, k int64, limit int) (*Frame, int, error) {
	slice := rec.NewSlice(off, off+k)
	fw.c.limit = limit
	fw.c.frame, fw.c.size, fw.c.wrote = nil, 0, false
	fw.alloc.deferring = true
	err := fw.w.Write(slice) // releases its payload: the buffers made for the frame are freed into alloc.frees
	slice.Release()          // rec keeps the buffers the frame references from it
	frees := fw.alloc.frees
	fw.alloc.deferring, fw.alloc.frees = false, nil
	f, size := fw.c.frame, fw.c.size
	fw.c.frame = nil
	switch {
	case err != nil:
	case !fw.c.wrote:
		err = errors.New("the IPC writer produced no record batch message")
	case f != nil:
		rec.Retain()
		f.hold = &hold{rec: rec, mem: fw.alloc.mem, frees: frees}
		f.refs.Store(1)
		return f, size, nil
	}
	for _, b := range frees {
		fw.alloc.mem.Free(b)
	}
	return nil, size, err
}

// deferringAllocator is the IPC writer's allocator. While a frame is encoded, frees are kept rather
// than done: the writer frees the buffers it made for the payload (rebased offsets, realigned
// bitmaps, compressed buffers) as soon as the payload is written, and the frame's body references
// them. The frame frees them on its last Release. Used by one goroutine at a time, as its writer.
type deferringAllocator struct {
	mem       memory.Allocator
	deferring bool
	frees     [][]byte
}

func (a *deferringAllocator) Allocate(size int) []byte { return a.mem.Allocate(size) }

func (a *deferringAllocator) Reallocate(size int, b []byte) []byte {
	return a.mem.Reallocate(size, b) // only while a buffer is built, before any frame references it
}

func (a *deferringAllocator) Free(b []byte) {
	if a.deferring {
		a.frees = append(a.frees, b)
		return
	}
	a.mem.Free(b)
}

// capture is an ipc.PayloadWriter that measures each record batch payload and, when it fits the
// limit, makes a Frame of it without copying the body: the frame's segments are the slices
// SerializeBody writes, which are the payload's buffers themselves and the IPC padding (a static
// block of zeros). The first payload of a writer is the schema message, which it skips.
type capture struct {
	started bool

	limit int
	wrote bool
	size  int
	frame *Frame
}

func (c *capture) Start() error { return nil }
func (c *capture) Close() error { return nil }

func (c *capture) WritePayload(p ipc.Payload) error {
	if !c.started {
		c.started = true // the schema message written when the writer starts
		return nil
	}
	meta := p.Meta()
	if meta == nil {
		return errors.New("IPC payload without metadata")
	}
	defer meta.Release()
	var body segments
	if err := p.SerializeBody(&body); err != nil {
		return err
	}
	c.wrote = true
	c.size = meta.Len() + body.n
	if c.size > c.limit {
		return nil
	}
	c.frame = &Frame{Header: bytes.Clone(meta.Bytes()), segs: body.segs, bodyLen: body.n}
	return nil
}

// segments is an io.Writer that keeps the slices written to it, without copying them.
type segments struct {
	segs [][]byte
	n    int
}

func (w *segments) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.segs = append(w.segs, p)
		w.n += len(p)
	}
	return len(p), nil
}

// Decode turns a frame back into a record batch (used to re-slice a partially acknowledged frame). The
// caller must Release the batch; it may share memory with the frame's body.
//
// Decode is meant for frames this encoder (or one with the same schema) produced. It checks the message
// type, body length and row count and turns decoder panics into errors, but arrow-go reads the IPC
// flatbuffer without verifying it, so arbitrary bytes from an untrusted source can make it allocate
// without bound.
func (e *Encoder) Decode(f *Frame) (rec arrow.RecordBatch, err error) {
	if f == nil {
		return nil, errors.New("partitioner: decode: nil frame")
	}
	if len(f.Header) < 8 {
		return nil, fmt.Errorf("partitioner: decode %s: header of %d bytes is not an IPC message", f.Span, len(f.Header))
	}
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("partitioner: decode %s: malformed IPC message: %v", f.Span, p)
		}
	}()
	body := f.Body
	if body == nil {
		body = f.AppendBody(nil) // the batch decoded shares it: a copy, so the batch does not need the frame
	}
	msgs := &messageList{msgs: []*ipc.Message{
		ipc.NewMessage(memory.NewBufferBytes(e.schemaMsg), memory.NewBufferBytes(nil)),
		ipc.NewMessage(memory.NewBufferBytes(f.Header), memory.NewBufferBytes(body)),
	}}
	defer msgs.releaseAll()
	if t := msgs.msgs[1].Type(); t != ipc.MessageRecordBatch {
		return nil, fmt.Errorf("partitioner: decode %s: header is a %s message, want a record batch", f.Span, t)
	}
	if n := msgs.msgs[1].BodyLen(); n != int64(len(body)) {
		return nil, fmt.Errorf("partitioner: decode %s: body is %d bytes, its header says %d", f.Span, len(body), n)
	}
	rdr, err := ipc.NewReaderFromMessageReader(msgs, ipc.WithAllocator(e.cfg.mem), ipc.WithSchema(e.schema))
	if err != nil {
		return nil, fmt.Errorf("partitioner: decode %s: %w", f.Span, err)
	}
	defer rdr.Release()
	if !rdr.Next() {
		if err := rdr.Err(); err != nil {
			return nil, fmt.Errorf("partitioner: decode %s: %w", f.Span, err)
		}
		return nil, fmt.Errorf("partitioner: decode %s: frame holds no record batch", f.Span)
	}
	rec = rdr.RecordBatch()
	if rec.NumRows() != f.Rows {
		return nil, fmt.Errorf("partitioner: decode %s: frame holds %d rows, its Rows says %d", f.Span, rec.NumRows(), f.Rows)
	}
	rec.Retain()
	return rec, nil
}

// messageList is an ipc.MessageReader over messages in memory.
type messageList struct {
	msgs []*ipc.Message
	next int
}

func (m *messageList) Message() (*ipc.Message, error) {
	if m.next >= len(m.msgs) {
		return nil, io.EOF
	}
	m.next++
	return m.msgs[m.next-1], nil
}

func (m *messageList) Retain()  {}
func (m *messageList) Release() {}

func (m *messageList) releaseAll() {
	for _, msg := range m.msgs {
		msg.Release()
	}
}
