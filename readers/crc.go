package readers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// Page checksums. arrow-go v18.8.0 reads Parquet pages without checking their CRC, so a flipped bit
// in a page would load silently. verifyRowGroupCRC walks each column chunk's page headers (Thrift
// compact protocol, parsed here because arrow-go keeps its Thrift types internal) and checks every
// page that carries a crc: CRC-32 (IEEE) of the page as written, after its header. A header that
// cannot be parsed stops the check for that chunk without failing it: decoding will judge it.

// errCRC reports a page whose checksum does not match.
type errCRC struct {
	column string
	offset int64
}

func (e *errCRC) Error() string {
	return fmt.Sprintf("column %s: the page at byte %d fails its checksum", e.column, e.offset)
}

func (e *errCRC) Unwrap() error { return ErrCorrupt }

func verifyRowGroupCRC(r io.ReaderAt, size int64, rg *metadata.RowGroupMetaData) error {
	for c := 0; c < rg.NumColumns(); c++ {
		cc, err := rg.ColumnChunk(c)
		if err != nil {
			return nil // decoding will report it
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
			start = cc.DictionaryPageOffset()
		}
		length := cc.TotalCompressedSize()
		if start < 0 || length <= 0 || start+length > size {
			continue
		}
		if err := verifyChunkCRC(r, start, length, cc.PathInSchema().String()); err != nil {
			return err
		}
	}
	return nil
}

func verifyChunkCRC(r io.ReaderAt, start, length int64, column string) error {
	// Stream the chunk: page headers are parsed from a small window, bodies are hashed as they are
	// read (starting with the part the window already holds), so memory stays bounded whatever the
	// chunk size and each byte is read once.
	var window [64 << 10]byte
	pos := int64(0)
	for pos < length {
		w := window[:min(int64(len(window)), length-pos)]
		n, err := r.ReadAt(w, start+pos)
		if n < len(w) && err != nil {
			return nil
		}
		h, hl, ok := parsePageHeader(w)
		if !ok || h.compressed < 0 || pos+int64(hl)+int64(h.compressed) > length {
			return nil
		}
		if h.hasCRC {
			head := w[hl:min(len(w), hl+int(h.compressed))]
			sum := crc32.ChecksumIEEE(head)
			off, rest := start+pos+int64(len(w)), int64(h.compressed)-int64(len(head))
			for rest > 0 {
				b := window[:min(int64(len(window)), rest)]
				if n, _ := r.ReadAt(b, off); n < len(b) {
					return nil
				}
				sum = crc32.Update(sum, crc32.IEEETable, b)
				off, rest = off+int64(len(b)), rest-int64(len(b))
			}
			if sum != uint32(h.crc) {
				return &errCRC{column: column, offset: start + pos}
			}
		}
		pos += int64(hl) + int64(h.compressed)
	}
	return nil
}

type pageHeader struct {
	compressed int32
	crc        int32
	hasCRC     bool
}

var errThrift = errors.New("bad thrift")

// compact is a reader of the Thrift compact protocol over a byte slice.
type compact struct {
	b   []byte
	pos int
	err error
}

func (c *compact) byte1() byte {
	if c.pos >= len(c.b) {
		c.err = errThrift
		return 0
	}
	v := c.b[c.pos]
	c.pos++
	return v
}

func (c *compact) uvarint() uint64 {
	v, n := binary.Uvarint(c.b[min(c.pos, len(c.b)):])
	if n <= 0 {
		c.err = errThrift
		return 0
	}
	c.pos += n
	return v
}

func (c *compact) zigzag() int64 {
	u := c.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// skip skips a value of compact type t; depth bounds nesting.
func (c *compact) skip(t byte, depth int) {
	if depth > 32 {
		c.err = errThrift
		return
	}
	switch t {
	case 1, 2: // bool in a field header
	case 3:
		c.byte1()
	case 4, 5, 6:
		c.uvarint()
	case 7:
		c.pos += 8
	case 8:
		n := c.uvarint()
		if n > uint64(len(c.b)) {
			c.err = errThrift
			return
		}
		c.pos += int(n)
	case 9, 10:
		h := c.byte1()
		n := uint64(h >> 4)
		if n == 15 {
			n = c.uvarint()
		}
		et := h & 0x0f
		if n > uint64(len(c.b)) {
			c.err = errThrift
			return
		}
		for i := uint64(0); i < n && c.err == nil; i++ {
			if et == 1 || et == 2 {
				c.byte1() // bools in collections are a byte each
				continue
			}
			c.skip(et, depth+1)
		}
	case 11:
		n := c.uvarint()
		if n == 0 {
			return
		}
		kv := c.byte1()
		if n > uint64(len(c.b)) {
			c.err = errThrift
			return
		}
		for i := uint64(0); i < n && c.err == nil; i++ {
			c.skip(kv>>4, depth+1)
			c.skip(kv&0x0f, depth+1)
		}
	case 12:
		c.skipStruct(depth + 1)
	default:
		c.err = errThrift
	}
	if c.pos > len(c.b) {
		c.err = errThrift
	}
}

func (c *compact) skipStruct(depth int) {
	for c.err == nil {
		h := c.byte1()
		if h == 0 {
			return
		}
		if h>>4 == 0 {
			c.zigzag() // long-form field id
		}
		c.skip(h&0x0f, depth)
	}
}

// parsePageHeader reads a PageHeader and returns it with its encoded length.
func parsePageHeader(b []byte) (pageHeader, int, bool) {
	c := &compact{b: b}
	var h pageHeader
	id := int16(0)
	seen := false
	for c.err == nil {
		fh := c.byte1()
		if c.err != nil {
			break
		}
		if fh == 0 {
			return h, c.pos, seen
		}
		if d := fh >> 4; d != 0 {
			id += int16(d)
		} else {
			id = int16(c.zigzag())
		}
		t := fh & 0x0f
		switch {
		case id == 3 && t == 5:
			h.compressed = int32(c.zigzag())
			seen = true
		case id == 4 && t == 5:
			h.crc = int32(c.zigzag())
			h.hasCRC = true
		default:
			c.skip(t, 0)
		}
	}
	return h, 0, false
}
