package readers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// arrow-go v18.8.0 trusts the lengths of flatbuffer vectors in an IPC schema: a corrupt field count
// makes it allocate that many fields on the Go heap, and a large enough count is a fatal "out of
// memory" that no recover can catch (found by FuzzBinaryFormats). So before arrow-go sees a schema,
// the schema flatbuffer is walked here with bounds checks: every vector and string must lie inside
// the message, and the walk itself is bounded (depth and visits), so a crafted DAG cannot hang it.

var errBadFlatbuffer = errors.New("malformed schema flatbuffer")

type fbuf struct {
	b      []byte
	visits int
}

func (f *fbuf) u32(at int) (int, error) {
	if at < 0 || at+4 > len(f.b) {
		return 0, errBadFlatbuffer
	}
	return int(binary.LittleEndian.Uint32(f.b[at:])), nil
}

func (f *fbuf) u16(at int) (int, error) {
	if at < 0 || at+2 > len(f.b) {
		return 0, errBadFlatbuffer
	}
	return int(binary.LittleEndian.Uint16(f.b[at:])), nil
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
		return fbTable{}, fmt.Errorf("%w: too many tables", errBadFlatbuffer)
	}
	so, err := f.u32(pos)
	if err != nil {
		return fbTable{}, err
	}
	vt := pos - int(int32(uint32(so)))
	size, err := f.u16(vt)
	if err != nil || size < 4 || vt+size > len(f.b) {
		return fbTable{}, errBadFlatbuffer
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
		return 0, errBadFlatbuffer
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

// child follows an offset field to a table; ok is false when the field is absent.
func (t fbTable) child(slot int) (fbTable, bool, error) {
	at, err := t.field(slot)
	if err != nil || at == 0 {
		return fbTable{}, false, err
	}
	rel, err := t.f.u32(at)
	if err != nil {
		return fbTable{}, false, err
	}
	c, err := t.f.table(at + rel)
	return c, err == nil, err
}

// vector checks a vector field of n elements of size elem and returns its start and length.
func (t fbTable) vector(slot, elem int) (int, int, error) {
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
	if n < 0 || n > len(t.f.b) || start+n*elem > len(t.f.b) {
		return 0, 0, fmt.Errorf("%w: a vector of %d elements does not fit the %d-byte message", errBadFlatbuffer, n, len(t.f.b))
	}
	return start, n, nil
}

// tables checks a vector of tables and calls fn on each.
func (t fbTable) tables(slot int, fn func(fbTable) error) error {
	start, n, err := t.vector(slot, 4)
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

func checkKeyValues(t fbTable, slot int) error {
	return t.tables(slot, func(kv fbTable) error {
		if _, _, err := kv.vector(0, 1); err != nil {
			return err
		}
		_, _, err := kv.vector(1, 1)
		return err
	})
}

const (
	fbTypeTimestamp = 10
	fbTypeUnion     = 14
)

func checkField(t fbTable, depth int) error {
	if depth > 64 {
		return fmt.Errorf("%w: fields nested more than 64 deep", errBadFlatbuffer)
	}
	if _, _, err := t.vector(0, 1); err != nil { // name
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
		case fbTypeUnion:
			if _, _, err := typ.vector(1, 4); err != nil { // typeIds
				return err
			}
		case fbTypeTimestamp:
			if _, _, err := typ.vector(1, 1); err != nil { // timezone
				return err
			}
		}
	}
	if _, _, err := t.child(4); err != nil { // dictionary encoding
		return err
	}
	if err := t.tables(5, func(c fbTable) error { return checkField(c, depth+1) }); err != nil {
		return err
	}
	return checkKeyValues(t, 6)
}

func checkSchemaTable(t fbTable) error {
	if err := t.tables(1, func(f fbTable) error { return checkField(f, 0) }); err != nil {
		return err
	}
	if err := checkKeyValues(t, 2); err != nil {
		return err
	}
	_, _, err := t.vector(3, 8) // features
	return err
}

func (t fbTable) i64(slot int) (int64, error) {
	at, err := t.field(slot)
	if err != nil || at == 0 {
		return 0, err
	}
	if at+8 > len(t.f.b) {
		return 0, errBadFlatbuffer
	}
	return int64(binary.LittleEndian.Uint64(t.f.b[at:])), nil
}

// checkRecordBatch checks a RecordBatch table: its vectors fit, and every variadic buffer count
// (arrow-go sizes a slice by it) is no more than the buffers the batch has.
func checkRecordBatch(t fbTable) error {
	if _, _, err := t.vector(1, 16); err != nil { // nodes
		return err
	}
	_, nbuf, err := t.vector(2, 16) // buffers
	if err != nil {
		return err
	}
	if _, _, err := t.child(3); err != nil { // compression
		return err
	}
	start, n, err := t.vector(4, 8) // variadicBufferCounts
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		v := int64(binary.LittleEndian.Uint64(t.f.b[start+8*i:]))
		if v < 0 || v > int64(nbuf) {
			return fmt.Errorf("%w: %d variadic buffers in a batch of %d buffers", errBadFlatbuffer, v, nbuf)
		}
	}
	return nil
}

// checkMessage checks an IPC Message flatbuffer (schema, dictionary batch or record batch) and
// returns its body length.
func checkMessage(b []byte) (int64, error) {
	f := &fbuf{b: b}
	root, err := f.u32(0)
	if err != nil {
		return 0, err
	}
	msg, err := f.table(root)
	if err != nil {
		return 0, err
	}
	if err := checkKeyValues(msg, 4); err != nil {
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
	case 1: // Schema
		err = checkSchemaTable(h)
	case 2: // DictionaryBatch
		if data, ok, derr := h.child(1); derr != nil {
			err = derr
		} else if ok {
			err = checkRecordBatch(data)
		}
	case 3: // RecordBatch
		err = checkRecordBatch(h)
	}
	return body, err
}

// precheckStream walks the messages of an IPC stream (metadata only; bodies are skipped) and
// checks each. A reader that cannot seek (a pipe) is not checked.
func precheckStream(r io.ReaderAt, size int64) error {
	pos := int64(0)
	head := make([]byte, 8)
	for msgs := 0; pos+4 <= size; msgs++ {
		n, _ := r.ReadAt(head, pos)
		if n < 4 {
			return nil
		}
		at := pos + 4
		l := int64(int32(binary.LittleEndian.Uint32(head)))
		if uint32(l) == 0xFFFFFFFF {
			if n < 8 {
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
		meta := make([]byte, l)
		if _, err := r.ReadAt(meta, at); err != nil {
			return nil
		}
		body, err := checkMessage(meta)
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

// precheckFile checks an IPC file's footer, its dictionary messages and the record batch messages
// [first, end), which is every one, with the stream of messages after the magic too, when end < 0.
// It returns the row count of each record batch checked (nil when the footer cannot be read here;
// arrow-go then judges it).
func precheckFile(r io.ReaderAt, size int64, first, end int) ([]int64, error) {
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
	if err := checkFooter(footer); err != nil {
		return nil, err
	}
	f := &fbuf{b: footer}
	root, _ := f.u32(0)
	ft, err := f.table(root)
	if err != nil {
		return nil, err
	}
	var rows []int64
	for _, slot := range []int{2, 3} {
		start, n, err := ft.vector(slot, 24)
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
			if off < 0 || metaLen < 8 || off+metaLen > size {
				rows = append(rows, -1)
				continue // arrow-go validates blocks
			}
			meta := make([]byte, metaLen)
			if _, err := r.ReadAt(meta, off); err != nil {
				rows = append(rows, -1)
				continue
			}
			fb := meta[4:]
			if binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
				fb = meta[8:]
			}
			if _, err := checkMessage(fb); err != nil {
				return nil, fmt.Errorf("block %d: %w", i, err)
			}
			if slot == 3 {
				rows = append(rows, batchLength(fb))
			}
		}
	}
	if end < 0 {
		// the schema message after the magic as well
		if err := precheckStream(io.NewSectionReader(r, 8, size-8), size-8); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// batchLength reads a RecordBatch message's row count, or -1.
func batchLength(b []byte) int64 {
	f := &fbuf{b: b}
	root, err := f.u32(0)
	if err != nil {
		return -1
	}
	msg, err := f.table(root)
	if err != nil {
		return -1
	}
	if ht, err := msg.u8(1); err != nil || ht != 3 {
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

// checkFooter checks an IPC file footer flatbuffer.
func checkFooter(b []byte) error {
	f := &fbuf{b: b}
	root, err := f.u32(0)
	if err != nil {
		return err
	}
	ft, err := f.table(root)
	if err != nil {
		return err
	}
	if sch, ok, err := ft.child(1); err != nil {
		return err
	} else if ok {
		if err := checkSchemaTable(sch); err != nil {
			return err
		}
	}
	for _, slot := range []int{2, 3} { // dictionaries, record batches: Blocks of 24 bytes
		if _, _, err := ft.vector(slot, 24); err != nil {
			return err
		}
	}
	return checkKeyValues(ft, 4)
}
