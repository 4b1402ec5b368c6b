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

// checkSchemaMessage checks an IPC Message flatbuffer that holds a schema.
func checkSchemaMessage(b []byte) error {
	f := &fbuf{b: b}
	root, err := f.u32(0)
	if err != nil {
		return err
	}
	msg, err := f.table(root)
	if err != nil {
		return err
	}
	if err := checkKeyValues(msg, 4); err != nil {
		return err
	}
	ht, err := msg.u8(1)
	if err != nil || ht != 1 { // not a schema: arrow-go reports it
		return err
	}
	sch, ok, err := msg.child(2)
	if err != nil || !ok {
		return err
	}
	return checkSchemaTable(sch)
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

// precheckStream checks the schema message at the start of an IPC stream.
func precheckStream(r io.ReaderAt, size int64) error {
	head := make([]byte, 8)
	n, _ := r.ReadAt(head, 0)
	if n < 4 {
		return nil // arrow-go reports the short file
	}
	at := int64(4)
	l := int64(int32(binary.LittleEndian.Uint32(head)))
	if uint32(l) == 0xFFFFFFFF {
		if n < 8 {
			return nil
		}
		l = int64(int32(binary.LittleEndian.Uint32(head[4:])))
		at = 8
	}
	if l <= 0 || at+l > size {
		return nil // arrow-go's size limits report it
	}
	meta := make([]byte, l)
	if _, err := r.ReadAt(meta, at); err != nil {
		return nil
	}
	return checkSchemaMessage(meta)
}

// precheckFile checks an IPC file's footer.
func precheckFile(r io.ReaderAt, size int64) error {
	if size < 16 {
		return nil
	}
	tail := make([]byte, 10)
	if _, err := r.ReadAt(tail, size-10); err != nil {
		return nil
	}
	l := int64(int32(binary.LittleEndian.Uint32(tail)))
	if l <= 0 || l > size-10 {
		return nil
	}
	footer := make([]byte, l)
	if _, err := r.ReadAt(footer, size-10-l); err != nil {
		return nil
	}
	if err := checkFooter(footer); err != nil {
		return err
	}
	// the schema message after the magic as well, which some readers consult
	if size > 8 {
		return precheckStream(io.NewSectionReader(r, 8, size-8), size-8)
	}
	return nil
}
