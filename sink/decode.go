package sink

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/arrowcheck"
	"github.com/loaderproject/loader/internal/ipcguard"
	"github.com/loaderproject/loader/internal/memlimit"
)

// maxDecodedFrameBytes bounds what decoding one frame, one log record or one Flight SQL call may
// hold in all (decompressed buffers).
const maxDecodedFrameBytes = 256 << 20

var (
	errDictionaryFrame = errors.New("is an IPC DictionaryBatch message: dictionary-encoded columns are not supported, send the dictionary's values in the column's canonical type")
	errSchemaFrame     = errors.New("is a second IPC Schema message: a DoPut carries one schema, in its first frame")
)

// newLimitedAllocator returns an allocator over mem that refuses, by panicking with a
// *memlimit.Error (which the decoder recovers and arrow-go wraps), allocations that would hold
// more than limit bytes in all, so a frame that lies about its decompressed size cannot exhaust
// memory.
func newLimitedAllocator(mem memory.Allocator, limit int64) *memlimit.Allocator {
	return memlimit.New(mem, limit, memlimit.Live)
}

// panicError turns a value a decoder panicked with into an error; a refused allocation keeps its
// *memlimit.Error.
func panicError(r any) error {
	if e, ok := memlimit.Recovered(r); ok {
		return e
	}
	return fmt.Errorf("%v", r)
}

// feeder hands the ipc.Reader one message at a time.
type feeder struct{ next *ipc.Message }

func (f *feeder) Message() (*ipc.Message, error) {
	m := f.next
	f.next = nil
	if m == nil {
		return nil, io.EOF
	}
	return m, nil
}
func (f *feeder) Retain()  {}
func (f *feeder) Release() {}

// parseMessage wraps header and body as an IPC message and reads its type, recovering from the
// panics flatbuffers raises on garbage.
func parseMessage(header, body []byte) (msg *ipc.Message, typ ipc.MessageType, bodyLen int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, fmt.Errorf("data_header is not an IPC message: %w", panicError(r))
		}
	}()
	if _, err := ipcguard.CheckMessage(header); err != nil {
		return nil, 0, 0, fmt.Errorf("data_header is not a valid IPC message: %w", err)
	}
	if body == nil {
		body = []byte{}
	}
	msg = ipc.NewMessage(memory.NewBufferBytes(header), memory.NewBufferBytes(body))
	typ, bodyLen = msg.Type(), msg.BodyLen()
	if v := msg.Version(); v < ipc.MetadataV4 || v > ipc.MetadataV5 {
		return nil, 0, 0, fmt.Errorf("data_header has IPC metadata version %d, want V4 or V5", int(v))
	}
	return msg, typ, bodyLen, nil
}

// decoder decodes the RecordBatch frames of one stream against the stream's schema message.
type decoder struct {
	feed   *feeder
	rdr    *ipc.Reader
	schema *arrow.Schema
	// structureOnly skips the UTF-8 checks of string values (checkBatchStructure): the discard sink's
	// decoders, whose batches nothing reads.
	structureOnly bool
}

// newDecoder reads a schema message (raw flatbuffer bytes, as in FlightData.data_header).
func newDecoder(schemaHeader []byte, mem memory.Allocator) (d *decoder, err error) {
	msg, typ, bodyLen, err := parseMessage(schemaHeader, nil)
	if err != nil {
		return nil, err
	}
	if typ != ipc.MessageSchema {
		return nil, fmt.Errorf("data_header is an IPC %s message, want Schema", typ)
	}
	if bodyLen != 0 {
		return nil, fmt.Errorf("the Schema message declares a %d-byte body, want none", bodyLen)
	}
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("the Schema message cannot be decoded: %w", panicError(r))
		}
	}()
	f := &feeder{next: msg}
	rdr, err := ipc.NewReaderFromMessageReader(f, ipc.WithAllocator(mem))
	if err != nil {
		return nil, fmt.Errorf("the Schema message cannot be decoded: %w", err)
	}
	return &decoder{feed: f, rdr: rdr, schema: rdr.Schema()}, nil
}

// decode returns the batch of one RecordBatch frame; the caller releases it. The batch aliases
// body unless its buffers are compressed.
func (d *decoder) decode(header, body []byte) (rec arrow.RecordBatch, err error) {
	msg, typ, bodyLen, err := parseMessage(header, body)
	if err != nil {
		return nil, err
	}
	switch typ {
	case ipc.MessageRecordBatch:
	case ipc.MessageDictionaryBatch:
		return nil, errDictionaryFrame
	case ipc.MessageSchema:
		return nil, errSchemaFrame
	default:
		return nil, fmt.Errorf("is an IPC %s message, want RecordBatch", typ)
	}
	if bodyLen != int64(len(body)) {
		return nil, fmt.Errorf("has a %d-byte data_body but its RecordBatch header declares %d bytes", len(body), bodyLen)
	}
	defer func() {
		if r := recover(); r != nil {
			if rec != nil {
				rec.Release()
			}
			rec, err = nil, fmt.Errorf("cannot be decoded: %w", panicError(r))
		}
	}()
	d.feed.next = msg
	if !d.rdr.Next() {
		if err := d.rdr.Err(); err != nil {
			return nil, fmt.Errorf("cannot be decoded: %w", err)
		}
		return nil, errors.New("cannot be decoded")
	}
	rec = d.rdr.RecordBatch()
	rec.Retain()
	if err := checkBatchStructure(rec, !d.structureOnly); err != nil {
		rec.Release()
		return nil, err
	}
	return rec, nil
}

// checkBatchStructure runs arrow's full consistency checks, so later readers cannot index out of
// range, with the UTF-8 checks of string values only when utf8Check is set (arrowcheck.Column).
func checkBatchStructure(rec arrow.RecordBatch, utf8Check bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("is inconsistent: %w", panicError(r))
		}
	}()
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			return fmt.Errorf("column %q has %d values for %d rows", rec.Schema().Field(i).Name, col.Len(), rec.NumRows())
		}
		if err := arrowcheck.Column(col, utf8Check); err != nil {
			return fmt.Errorf("column %q is inconsistent: %w", rec.Schema().Field(i).Name, err)
		}
	}
	return nil
}

func (d *decoder) release() {
	if d != nil && d.rdr != nil {
		d.rdr.Release()
		d.rdr = nil
	}
}

// decodeRecord decodes a write-ahead log record on its own.
func decodeRecord(r walRecord, mem memory.Allocator) (arrow.RecordBatch, error) {
	d, err := newDecoder(r.schema, mem)
	if err != nil {
		return nil, err
	}
	defer d.release()
	return d.decode(r.header, r.body)
}
