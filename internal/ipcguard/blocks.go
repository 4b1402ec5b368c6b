package ipcguard

import (
	"encoding/binary"
	"io"
)

// Block is the byte range of one message of an IPC file: Len bytes (metadata and body) at Off.
type Block struct{ Off, Len int64 }

// FileBlocks reads an IPC file's footer and returns its dictionary and record batch blocks, for
// readers that fetch a file's bytes ahead (object stores). Blocks whose numbers do not fit the
// file are left out; ok is false when the footer cannot be read here (arrow-go then judges it).
func FileBlocks(r io.ReaderAt, size int64) (dicts, records []Block, ok bool) {
	if size < 16 {
		return nil, nil, false
	}
	tail := make([]byte, 10)
	if _, err := r.ReadAt(tail, size-10); err != nil {
		return nil, nil, false
	}
	l := int64(int32(binary.LittleEndian.Uint32(tail)))
	if l <= 0 || l > size-10 {
		return nil, nil, false
	}
	footer := make([]byte, l)
	if _, err := r.ReadAt(footer, size-10-l); err != nil {
		return nil, nil, false
	}
	ft, err := checkFooter(footer)
	if err != nil {
		return nil, nil, false
	}
	for _, slot := range []int{2, 3} {
		start, n, err := ft.vector(slot, 24, "footer blocks")
		if err != nil {
			return nil, nil, false
		}
		for i := 0; i < n; i++ {
			blk := footer[start+24*i:]
			off := int64(binary.LittleEndian.Uint64(blk))
			metaLen := int64(int32(binary.LittleEndian.Uint32(blk[8:])))
			bodyLen := int64(binary.LittleEndian.Uint64(blk[16:]))
			b := Block{Off: off, Len: metaLen + bodyLen}
			if off < 0 || metaLen < 0 || bodyLen < 0 || b.Len > size || off > size-b.Len {
				b = Block{} // an empty range: the prefetch skips it and arrow-go judges the block
			}
			if slot == 2 {
				dicts = append(dicts, b)
			} else {
				records = append(records, b)
			}
		}
	}
	return dicts, records, true
}
