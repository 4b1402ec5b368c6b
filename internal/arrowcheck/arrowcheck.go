package arrowcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// Full runs arrow's full consistency checks on one column (array.ValidateFull), with a
// faster path for string columns, top-level or inside lists, maps and structs, where arrow checks
// UTF-8 one value at a time: there the offsets are checked to be non-decreasing, the bytes they
// span are checked as UTF-8 in one pass, and every offset is checked to start a character (not a
// continuation byte), which together say that every value is valid UTF-8. The verdict is the same
// as ValidateFull's (a differential test holds it to that).
func Full(col arrow.Array) error { return Column(col, true) }

// Column is Full, with the UTF-8 checks of string values only when utf8Check is set: without them
// it checks the column's structure alone (buffers, lengths, offsets, null counts), all that reading
// it safely takes (the discard sink's checks).
func Column(col arrow.Array, utf8Check bool) error {
	switch a := col.(type) {
	case *array.String:
		return validateStrings(a, a.ValueOffsets, utf8Check)
	case *array.LargeString:
		return validateStrings(a, a.ValueOffsets, utf8Check)
	case *array.List, *array.LargeList, *array.Map, *array.Struct:
		// Their own full checks (offsets, child lengths) do not descend into the children; arrow's
		// recursion does, and that is what is done here, with this function for each child.
		if err := array.Validate(a); err != nil {
			return err
		}
		if err := checkNullCount(a); err != nil {
			return err
		}
		if err := a.(array.Validator).ValidateFull(); err != nil {
			return err
		}
		for i, cd := range a.Data().Children() {
			child := array.MakeFromData(cd)
			err := Column(child, utf8Check)
			child.Release()
			if err != nil {
				return fmt.Errorf("child %d: %w", i, err)
			}
		}
		return nil
	}
	return array.ValidateFull(col)
}

// checkNullCount checks the declared null count against the validity bitmap.
func checkNullCount(a arrow.Array) error {
	n := a.Len()
	if bm := a.NullBitmapBytes(); n > 0 && len(bm) > 0 {
		if nulls := n - bitutil.CountSetBits(bm, a.Data().Offset(), n); nulls != a.NullN() {
			return fmt.Errorf("null count value (%d) does not match actual number of nulls in array (%d)", a.NullN(), nulls)
		}
	}
	return nil
}

// validateStrings checks a String or LargeString array, its values as UTF-8 when utf8Check is set;
// offsetsOf returns its n+1 offsets, which are safe to take once array.Validate has checked the
// offsets buffer's length.
func validateStrings[O int32 | int64](a arrow.Array, offsetsOf func() []O, utf8Check bool) error {
	if err := array.Validate(a); err != nil { // buffers, lengths, first and last offsets in range
		return err
	}
	n := a.Len()
	if n == 0 {
		return nil
	}
	if err := checkNullCount(a); err != nil {
		return err
	}
	offsets := offsetsOf()[:n+1]
	var values []byte
	if b := a.Data().Buffers()[2]; b != nil {
		values = b.Bytes()
	}
	first, last := offsets[0], offsets[n]
	if first < 0 || last < first || int64(last) > int64(len(values)) {
		return fmt.Errorf("string offsets %d to %d are outside the %d bytes of values", first, last, len(values))
	}
	prev := first
	for i, o := range offsets[1:] {
		if o < prev {
			return fmt.Errorf("string offsets are not monotonically non-decreasing at index %d: %d < %d", i+1, o, prev)
		}
		prev = o
	}
	if !utf8Check {
		return nil
	}
	text := values[first:last]
	if ascii(text) {
		return nil // every byte is a character, so every value is one string of them
	}
	if utf8.Valid(text) {
		for i, o := range offsets[1:n] {
			if o < last && !utf8.RuneStart(values[o]) {
				return fmt.Errorf("string at index %d is not valid utf8: it ends inside a character", i)
			}
		}
		return nil
	}
	for i := range n { // name the first bad value
		if !utf8.Valid(values[offsets[i]:offsets[i+1]]) {
			return fmt.Errorf("string at index %d is not valid utf8", i)
		}
	}
	return errors.New("strings are not valid utf8") // not reached: the bad bytes lie in some value
}

// ascii reports whether every byte of b is below 0x80, 32 bytes at a time.
func ascii(b []byte) bool {
	const high = 0x8080808080808080
	for len(b) >= 32 {
		w := binary.LittleEndian.Uint64(b) | binary.LittleEndian.Uint64(b[8:]) |
			binary.LittleEndian.Uint64(b[16:]) | binary.LittleEndian.Uint64(b[24:])
		if w&high != 0 {
			return false
		}
		b = b[32:]
	}
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&high != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
