// Package ipcguard checks Arrow IPC flatbuffers (messages and file footers) before arrow-go decodes
// them, for every path that reads IPC from outside the process: the readers' IPC files and streams,
// and the sink's Zerobus and Flight SQL frames.
//
// arrow-go v18.8.0 trusts the counts a flatbuffer claims: it sizes slices by the number of fields,
// children, custom metadata entries, union type ids, record batch nodes and buffers and variadic
// buffer counts, and it recurses through nested fields without a depth limit. A corrupt or hostile
// count makes it allocate terabytes or recurse until the stack overflows; both are fatal errors of
// the Go runtime that no recover can catch (found by the readers' FuzzBinaryFormats and the sink's
// FuzzDecoder). So the flatbuffer is walked here first, with bounds checks: every table, vector and
// string must lie inside the message, every variadic buffer count is at most the batch's buffers,
// and the walk is bounded (fields nested at most MaxDepth deep, at most one field per four bytes,
// at most one table visit per byte), so a crafted DAG of shared tables cannot make it, or arrow-go,
// run for long.
//
// Slots follow format/Message.fbs, format/Schema.fbs and format/File.fbs. The checks are stateless
// and safe for concurrent use. Errors wrap ErrMalformed.
package ipcguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrMalformed is the base of every error this package returns.
var ErrMalformed = errors.New("malformed IPC flatbuffer")

// MaxDepth is how deep schema fields may nest.
const MaxDepth = 64

// fbuf is one flatbuffer being walked, with what is left of its budgets.
type fbuf struct {
	b      []byte
	visits int // tables visited
	fields int // fields left to visit: a field takes at least four bytes, so more means a DAG
}

func newFbuf(b []byte) *fbuf { return &fbuf{b: b, fields: len(b) / 4} }

func (f *fbuf) u32(at int) (int, error) {
	if at < 0 || at+4 > len(f.b) {
		return 0, fmt.Errorf("%w: an offset at %d is outside the %d-byte buffer", ErrMalformed, at, len(f.b))
	}
	return int(binary.LittleEndian.Uint32(f.b[at:])), nil
}

func (f *fbuf) u16(at int) (int, error) {
	if at < 0 || at+2 > len(f.b) {
		return 0, fmt.Errorf("%w: a vtable entry at %d is outside the %d-byte buffer", ErrMalformed, at, len(f.b))
	}
	return int(binary.LittleEndian.Uint16(f.b[at:])), nil
}

// root returns the buffer's root table.
func (f *fbuf) root() (fbTable, error) {
	if len(f.b) < 8 {
		return fbTable{}, fmt.Errorf("%w: %d bytes is too short for a flatbuffer", ErrMalformed, len(f.b))
	}
	pos, err := f.u32(0)
	if err != nil {
		return fbTable{}, err
	}
	return f.table(pos)
}

type fbTable struct {
	f      *fbuf
	pos    int
	vt     int
	vtSize int
}

// table reads the table at pos.
func (f *fbuf) table(pos int) (fbTable, error) {
	f.visits++
	if f.visits > len(f.b)+16 {
		return fbTable{}, fmt.Errorf("%w: more tables than the %d-byte buffer can hold", ErrMalformed, len(f.b))
	}
	so, err := f.u32(pos)
	if err != nil {
		return fbTable{}, err
	}
	vt := pos - int(int32(uint32(so)))
	size, err := f.u16(vt)
	if err != nil {
		return fbTable{}, err
	}
	if size < 4 || vt+size > len(f.b) {
		return fbTable{}, fmt.Errorf("%w: a %d-byte vtable at %d does not fit the %d-byte buffer", ErrMalformed, size, vt, len(f.b))
	}
	return fbTable{f: f, pos: pos, vt: vt, vtSize: size}, nil
}

// field returns the absolute position of a field, or 0 when absent.
func (t fbTable) field(slot int) (int, error) {
	e := 4 + 2*slot
	if e+2 > t.vtSize {
		return 0, nil
	}
	off, err := t.f.u16(t.vt + e)
	if err != nil || off == 0 {
		return 0, err
	}
	if t.pos+off >= len(t.f.b) {
		return 0, fmt.Errorf("%w: a field at %d is outside the %d-byte buffer", ErrMalformed, t.pos+off, len(t.f.b))
	}
	return t.pos + off, nil
}

func (t fbTable) u8(slot int) (int, error) {
	at, err := t.field(slot)
	if err != nil || at == 0 {
		return 0, err
	}
	return int(t.f.b[at]), nil
}

func (t fbTable) i64(slot int) (int64, error) {
	at, err := t.field(slot)
	if err != nil || at == 0 {
		return 0, err
	}
	if at+8 > len(t.f.b) {
		return 0, fmt.Errorf("%w: an int64 at %d is outside the %d-byte buffer", ErrMalformed, at, len(t.f.b))
	}
	return int64(binary.LittleEndian.Uint64(t.f.b[at:])), nil
}

// child follows an offset field to a table; ok is false when the field is absent.
func (t fbTable) child(slot int) (c fbTable, ok bool, err error) {
	at, err := t.field(slot)
	if err != nil || at == 0 {
		return fbTable{}, false, err
	}
	rel, err := t.f.u32(at)
	if err != nil {
		return fbTable{}, false, err
	}
	c, err = t.f.table(at + rel)
	return c, err == nil, err
}

// vector checks a vector field (what it holds, for errors) of elements of elem bytes and returns
// its start and length; an absent vector is empty.
func (t fbTable) vector(slot, elem int, what string) (int, int, error) {
	at, err := t.field(slot)
	if err != nil || at == 0 {
		return 0, 0, err
	}
	rel, err := t.f.u32(at)
	if err != nil {
		return 0, 0, err
	}
	vec := at + rel
	n, err := t.f.u32(vec)
	if err != nil {
		return 0, 0, err
	}
	start := vec + 4
	if n < 0 || n > len(t.f.b) || start+n*elem > len(t.f.b) { // (n < 0: an int of 32 bits)
		return 0, 0, fmt.Errorf("%w: %s claims %d entries, which do not fit the %d-byte buffer", ErrMalformed, what, n, len(t.f.b))
	}
	return start, n, nil
}

// tables checks a vector of tables and calls fn on each.
func (t fbTable) tables(slot int, what string, fn func(fbTable) error) error {
	start, n, err := t.vector(slot, 4, what)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		at := start + 4*i
		rel, err := t.f.u32(at)
		if err != nil {
			return err
		}
		c, err := t.f.table(at + rel)
		if err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// keyValues checks a vector of KeyValue tables: each key and value string fits.
func keyValues(t fbTable, slot int, what string) error {
	return t.tables(slot, what, func(kv fbTable) error {
		if _, _, err := kv.vector(0, 1, what+" key"); err != nil {
			return err
		}
		_, _, err := kv.vector(1, 1, what+" value")
		return err
	})
}

// Type union tags (Schema.fbs) whose tables hold vectors.
const (
	typeTimestamp = 10
	typeUnion     = 14
)

// field checks a Field table and, recursively, its children.
func field(t fbTable, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: schema fields nested more than %d deep", ErrMalformed, MaxDepth)
	}
	if t.f.fields--; t.f.fields < 0 {
		return fmt.Errorf("%w: more schema fields than the %d-byte buffer can hold", ErrMalformed, len(t.f.b))
	}
	if _, _, err := t.vector(0, 1, "field name"); err != nil {
		return err
	}
	tt, err := t.u8(2)
	if err != nil {
		return err
	}
	if typ, ok, err := t.child(3); err != nil {
		return err
	} else if ok {
		switch tt {
		case typeUnion:
			if _, _, err := typ.vector(1, 4, "union type ids"); err != nil {
				return err
			}
		case typeTimestamp:
			if _, _, err := typ.vector(1, 1, "timestamp time zone"); err != nil {
				return err
			}
		}
	}
	if _, _, err := t.child(4); err != nil { // dictionary encoding
		return err
	}
	if err := t.tables(5, "field children", func(c fbTable) error { return field(c, depth+1) }); err != nil {
		return err
	}
	return keyValues(t, 6, "field custom_metadata")
}

// schema checks a Schema table.
func schema(t fbTable) error {
	if err := t.tables(1, "schema fields", func(f fbTable) error { return field(f, 0) }); err != nil {
		return err
	}
	if err := keyValues(t, 2, "schema custom_metadata"); err != nil {
		return err
	}
	_, _, err := t.vector(3, 8, "schema features")
	return err
}

// recordBatch checks a RecordBatch table: its vectors fit, and every variadic buffer count (arrow-go
// sizes a slice by it) is no more than the buffers the batch has.
func recordBatch(t fbTable) error {
	if _, _, err := t.vector(1, 16, "record batch nodes"); err != nil {
		return err
	}
	_, nbuf, err := t.vector(2, 16, "record batch buffers")
	if err != nil {
		return err
	}
	if _, _, err := t.child(3); err != nil { // compression
		return err
	}
	start, n, err := t.vector(4, 8, "record batch variadic buffer counts")
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		v := int64(binary.LittleEndian.Uint64(t.f.b[start+8*i:]))
		if v < 0 || v > int64(nbuf) {
			return fmt.Errorf("%w: %d variadic buffers in a batch of %d buffers", ErrMalformed, v, nbuf)
		}
	}
	return nil
}

// Message header types (Message.fbs).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
)

// CheckMessage checks an IPC Message flatbuffer (the metadata of a schema, dictionary batch or
// record batch message, as in FlightData.data_header) and returns the body length it declares. It
// reads only b. A message of another type, or without a header, is checked as far as it goes:
// arrow-go reports what is missing.
func CheckMessage(b []byte) (bodyLen int64, err error) {
	f := newFbuf(b)
	msg, err := f.root()
	if err != nil {
		return 0, err
	}
	if err := keyValues(msg, 4, "message custom_metadata"); err != nil {
		return 0, err
	}
	body, err := msg.i64(3)
	if err != nil {
		return 0, err
	}
	ht, err := msg.u8(1)
	if err != nil {
		return 0, err
	}
	h, ok, err := msg.child(2)
	if err != nil || !ok {
		return body, err
	}
	switch ht {
	case headerSchema:
		err = schema(h)
	case headerDictionaryBatch:
		if data, ok, derr := h.child(1); derr != nil {
			err = derr
		} else if ok {
			err = recordBatch(data)
		}
	case headerRecordBatch:
		err = recordBatch(h)
	}
	return body, err
}

// batchLength reads a RecordBatch message's row count, or -1.
func batchLength(b []byte) int64 {
	msg, err := newFbuf(b).root()
	if err != nil {
		return -1
	}
	if ht, err := msg.u8(1); err != nil || ht != headerRecordBatch {
		return -1
	}
	h, ok, err := msg.child(2)
	if err != nil || !ok {
		return -1
	}
	n, err := h.i64(0)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// checkFooter checks an IPC file Footer flatbuffer and returns its root table.
func checkFooter(b []byte) (fbTable, error) {
	ft, err := newFbuf(b).root()
	if err != nil {
		return fbTable{}, err
	}
	if sch, ok, err := ft.child(1); err != nil {
		return fbTable{}, err
	} else if ok {
		if err := schema(sch); err != nil {
			return fbTable{}, err
		}
	}
	for _, slot := range []int{2, 3} { // dictionaries, record batches: Blocks of 24 bytes
		if _, _, err := ft.vector(slot, 24, "footer blocks"); err != nil {
			return fbTable{}, err
		}
	}
	if err := keyValues(ft, 4, "footer custom_metadata"); err != nil {
		return fbTable{}, err
	}
	return ft, nil
}

// CheckStream walks the messages of an IPC stream of size bytes (metadata only; bodies are skipped)
// and checks each with CheckMessage. It stops without an error where the framing ends or cannot be
// followed (a short read, a length past the end): arrow-go's own size limits report those. It reads
// at least streamPeek bytes at a time, so that a message's length prefix and its metadata (and the
// messages after a short one) cost one read: one ranged GET, for an object.
func CheckStream(r io.ReaderAt, size int64) error {
	w := &window{r: r, size: size}
	pos := int64(0)
	for msgs := 0; pos+4 <= size; msgs++ {
		head := w.at(pos, 8)
		if len(head) < 4 {
			return nil
		}
		at := pos + 4
		l := int64(int32(binary.LittleEndian.Uint32(head)))
		if uint32(l) == 0xFFFFFFFF {
			if len(head) < 8 {
				return nil
			}
			l = int64(int32(binary.LittleEndian.Uint32(head[4:])))
			at = pos + 8
		}
		if l == 0 {
			return nil // end of stream
		}
		if l < 0 || at+l > size {
			return nil // arrow-go's size limits report it
		}
		meta := w.at(at, l)
		if int64(len(meta)) < l {
			return nil
		}
		body, err := CheckMessage(meta)
		if err != nil {
			return fmt.Errorf("message %d: %w", msgs, err)
		}
		if body < 0 || at+l+body > size {
			return nil // arrow-go reports the short body
		}
		pos = at + l + body
	}
	return nil
}

// streamPeek is the least CheckStream reads at a time: more than most messages' metadata.
const streamPeek = 16 << 10

// window reads a stream's bytes for CheckStream, a streamPeek or more at a time, and keeps the last
// read.
type window struct {
	r    io.ReaderAt
	size int64
	off  int64
	buf  []byte
}

// at returns the n bytes at off, or fewer where the stream ends or a read fails; the slice is valid
// until the next call.
func (w *window) at(off, n int64) []byte {
	if off >= w.off && off+n <= w.off+int64(len(w.buf)) {
		return w.buf[off-w.off : off-w.off+n]
	}
	w.off, w.buf = off, make([]byte, max(0, min(max(n, streamPeek), w.size-off)))
	k, _ := w.r.ReadAt(w.buf, off)
	w.buf = w.buf[:k]
	return w.buf[:min(int64(k), n)]
}

// CheckFile checks an IPC file of size bytes: its footer, its dictionary messages and the record
// batch messages [first, end), or every one, with the stream of messages after the leading magic
// too, when end < 0. It returns the row count of each record batch checked, -1 where a block
// cannot be read here; rows is nil when the footer cannot be read here (arrow-go then judges it).
func CheckFile(r io.ReaderAt, size int64, first, end int) (rows []int64, err error) {
	if size < 16 {
		return nil, nil
	}
	tail := make([]byte, 10)
	if _, err := r.ReadAt(tail, size-10); err != nil {
		return nil, nil
	}
	l := int64(int32(binary.LittleEndian.Uint32(tail)))
	if l <= 0 || l > size-10 {
		return nil, nil
	}
	footer := make([]byte, l)
	if _, err := r.ReadAt(footer, size-10-l); err != nil {
		return nil, nil
	}
	ft, err := checkFooter(footer)
	if err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	for _, slot := range []int{2, 3} {
		start, n, err := ft.vector(slot, 24, "footer blocks")
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			if slot == 3 && end >= 0 && (i < first || i >= end) {
				continue
			}
			blk := footer[start+24*i:]
			off := int64(binary.LittleEndian.Uint64(blk))
			metaLen := int64(int32(binary.LittleEndian.Uint32(blk[8:])))
			meta := []byte(nil)
			if off >= 0 && metaLen >= 8 && off+metaLen <= size { // else arrow-go judges the block
				meta = make([]byte, metaLen)
				if _, err := r.ReadAt(meta, off); err != nil {
					meta = nil
				}
			}
			if meta == nil {
				if slot == 3 {
					rows = append(rows, -1)
				}
				continue
			}
			fb := meta[4:]
			if binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
				fb = meta[8:]
			}
			if _, err := CheckMessage(fb); err != nil {
				return nil, fmt.Errorf("block %d: %w", i, err)
			}
			if slot == 3 {
				rows = append(rows, batchLength(fb))
			}
		}
	}
	if end < 0 {
		// the schema message after the magic as well
		if err := CheckStream(io.NewSectionReader(r, 8, size-8), size-8); err != nil {
			return nil, err
		}
	}
	return rows, nil
}
