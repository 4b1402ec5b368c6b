package partitioner

import (
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

	"github.com/loaderproject/loader/internal/bufpool"
)

// Sizing factors. After a frame of k rows encoded to s bytes, the next guess is k*grow*limit/s rows;
// after a try that was too large, k*shrink*limit/s. Both stay below 1 so that rows of uneven width
// rarely need a second try.
const (
	growFactor   = 0.95
	shrinkFactor = 0.9
)

// minPooledFrame is the smallest frame whose buffer comes from the encoder's pool: smaller ones cost
// Go little, and the client's codec copies bodies this small rather than reference them.
const minPooledFrame = 32 << 10

// Encoder encodes batches of one schema into frames of at most maxFrameBytes. It is safe for
// concurrent use.
type Encoder struct {
	schema    *arrow.Schema
	max       int
	cfg       encoderConfig
	ipcOpts   []ipc.Option
	schemaMsg []byte

	writers sync.Pool // *frameWriter
	// frames holds the buffers of released frames (see Frame), for the frames encoded next.
	frames *bufpool.Pool

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
	e := &Encoder{schema: schema, max: maxFrameBytes, cfg: cfg, frames: bufpool.NewUnzeroed()}
	e.ipcOpts = []ipc.Option{ipc.WithSchema(schema), ipc.WithAllocator(cfg.mem)}
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
// exceeds the limit is an error wrapping ErrRowTooLarge. The caller keeps ownership of rec.
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
	fw := &frameWriter{c: capture{pool: e.frames}}
	fw.w = ipc.NewWriterWithPayloadWriter(&fw.c, e.ipcOpts...)
	return fw
}

// frameWriter is an IPC writer whose payloads land in a capture instead of a stream. The writer keeps
// its record encoder and compressors between calls.
type frameWriter struct {
	w *ipc.Writer
	c capture
}

// encode encodes rows [off, off+k) of rec. It returns the frame when it fits limit, else nil, and the
// encoded size either way.
func (fw *frameWriter) encode(rec arrow.RecordBatch, off, k int64, limit int) (*Frame, int, error) {
	slice := rec.NewSlice(off, off+k)
	defer slice.Release()
	fw.c.limit = limit
	fw.c.frame, fw.c.size, fw.c.wrote = nil, 0, false
	if err := fw.w.Write(slice); err != nil {
		return nil, 0, err
	}
	if !fw.c.wrote {
		return nil, 0, errors.New("the IPC writer produced no record batch message")
	}
	return fw.c.frame, fw.c.size, nil
}

// capture is an ipc.PayloadWriter that measures each record batch payload and copies it into a Frame
// only when it fits the limit. The first payload of a writer is the schema message, which it skips.
//
// A frame's buffer comes from pool when it is at least minPooledFrame bytes and the pool's size class
// wastes at most a third of it (frames near a power-of-two limit, the usual case), else from Go.
// Every byte of it is written (header, then body and its padding), so the pool need not zero it.
// Reused buffers spare Go zeroing fresh memory and collecting it again: frames are most of what a
// load allocates.
type capture struct {
	started bool
	pool    *bufpool.Pool

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
	var cnt countingWriter
	if err := p.SerializeBody(&cnt); err != nil {
		return err
	}
	c.wrote = true
	c.size = meta.Len() + cnt.n
	if c.size > c.limit {
		return nil
	}
	pooled := c.pool != nil && c.size >= minPooledFrame && bufpool.Capacity(c.size) <= c.size+c.size/3
	var buf []byte
	if pooled {
		buf = c.pool.Allocate(c.size)[:meta.Len()]
	} else {
		buf = make([]byte, meta.Len(), c.size)
	}
	copy(buf, meta.Bytes())
	w := appendWriter{b: buf}
	if err := p.SerializeBody(&w); err != nil {
		return err
	}
	if len(w.b) != c.size || &w.b[0] != &buf[0] {
		return fmt.Errorf("IPC body serialized to %d bytes, measured %d", len(w.b)-meta.Len(), c.size-meta.Len())
	}
	c.frame = &Frame{Header: w.b[:meta.Len():meta.Len()], Body: w.b[meta.Len():c.size:c.size]}
	if pooled {
		c.frame.pool, c.frame.buf = c.pool, w.b[:cap(w.b)]
		c.frame.refs.Store(1)
	}
	return nil
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

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
	msgs := &messageList{msgs: []*ipc.Message{
		ipc.NewMessage(memory.NewBufferBytes(e.schemaMsg), memory.NewBufferBytes(nil)),
		ipc.NewMessage(memory.NewBufferBytes(f.Header), memory.NewBufferBytes(f.Body)),
	}}
	defer msgs.releaseAll()
	if t := msgs.msgs[1].Type(); t != ipc.MessageRecordBatch {
		return nil, fmt.Errorf("partitioner: decode %s: header is a %s message, want a record batch", f.Span, t)
	}
	if n := msgs.msgs[1].BodyLen(); n != int64(len(f.Body)) {
		return nil, fmt.Errorf("partitioner: decode %s: body is %d bytes, its header says %d", f.Span, len(f.Body), n)
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
