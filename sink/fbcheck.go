package sink

import (
	"errors"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// checkMessage rejects IPC message flatbuffers whose counts could not fit in their bytes, before
// arrow-go decodes them. arrow-go sizes slices from the counts a message claims (fields, children,
// custom metadata, union type ids) and recurses without a depth limit; a corrupt or hostile frame
// could otherwise make it allocate terabytes or recurse forever, which no recover can catch.
// Slots follow format/Message.fbs and format/Schema.fbs.
func checkMessage(buf []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed flatbuffer (%v)", r)
		}
	}()
	if len(buf) < 8 {
		return errors.New("malformed flatbuffer (too short)")
	}
	c := fbChecker{size: len(buf), budget: len(buf) / 4}
	msg := fbTable{flatbuffers.Table{Bytes: buf, Pos: flatbuffers.GetUOffsetT(buf)}}
	if err := c.vector(msg, 12, 4, "message custom_metadata"); err != nil {
		return err
	}
	header, ok := msg.table(8)
	if !ok {
		return nil // arrow-go reports a missing header itself
	}
	switch msg.byteSlot(6) {
	case 1: // Schema
		if err := c.vector(header, 8, 4, "schema custom_metadata"); err != nil {
			return err
		}
		if err := c.vector(header, 10, 8, "schema features"); err != nil {
			return err
		}
		return c.fields(header, 6, 0)
	case 3: // RecordBatch
		for _, v := range []struct {
			slot flatbuffers.VOffsetT
			elem int
			what string
		}{{6, 16, "record batch nodes"}, {8, 16, "record batch buffers"}, {12, 8, "record batch variadic buffer counts"}} {
			if err := c.vector(header, v.slot, v.elem, v.what); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxSchemaDepth bounds the nesting of schema fields.
const maxSchemaDepth = 64

type fbChecker struct {
	size   int
	budget int // fields left to visit: a field table takes at least 4 bytes, so more means a loop
}

type fbTable struct{ flatbuffers.Table }

func (t fbTable) byteSlot(slot flatbuffers.VOffsetT) byte {
	if o := flatbuffers.UOffsetT(t.Offset(slot)); o != 0 {
		return t.GetByte(o + t.Pos)
	}
	return 0
}

func (t fbTable) table(slot flatbuffers.VOffsetT) (fbTable, bool) {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	if o == 0 {
		return fbTable{}, false
	}
	return fbTable{flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(o + t.Pos)}}, true
}

func (t fbTable) vectorLen(slot flatbuffers.VOffsetT) int {
	if o := flatbuffers.UOffsetT(t.Offset(slot)); o != 0 {
		return t.VectorLen(o)
	}
	return 0
}

func (t fbTable) vectorTable(slot flatbuffers.VOffsetT, i int) fbTable {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	x := t.Vector(o) + flatbuffers.UOffsetT(i)*4
	return fbTable{flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(x)}}
}

// vector checks that the vector in slot, of elements of elem bytes, fits in the buffer.
func (c *fbChecker) vector(t fbTable, slot flatbuffers.VOffsetT, elem int, what string) error {
	if n := t.vectorLen(slot); n < 0 || n > c.size/elem {
		return fmt.Errorf("malformed flatbuffer: %s claims %d entries in a %d-byte message", what, n, c.size)
	}
	return nil
}

// fields checks a vector of Field tables and, recursively, their children.
func (c *fbChecker) fields(t fbTable, slot flatbuffers.VOffsetT, depth int) error {
	if depth > maxSchemaDepth {
		return fmt.Errorf("malformed schema: fields nested more than %d deep", maxSchemaDepth)
	}
	if err := c.vector(t, slot, 4, "field list"); err != nil {
		return err
	}
	for i := range t.vectorLen(slot) {
		if c.budget--; c.budget < 0 {
			return errors.New("malformed schema: more fields than the message can hold")
		}
		f := t.vectorTable(slot, i)
		if err := c.vector(f, 16, 4, "field custom_metadata"); err != nil {
			return err
		}
		if f.byteSlot(8) == 14 { // Union: its type ids
			if u, ok := f.table(10); ok {
				if err := c.vector(u, 6, 4, "union type ids"); err != nil {
					return err
				}
			}
		}
		if err := c.fields(f, 14, depth+1); err != nil {
			return err
		}
	}
	return nil
}
