package readers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// Page headers. Before a row group decodes, checkRowGroupPages walks each column chunk's page
// headers (Thrift compact protocol, parsed here because arrow-go keeps its Thrift types internal)
// for two checks arrow-go v18.8.0 does not make:
//
//   - Page sizes: a page whose uncompressed size is over WithMaxPageBytes fails with a
//     *PageTooLargeError before anything is decompressed (arrow-go would allocate the whole page,
//     from Go's heap, on the header's word).
//   - Checksums (WithVerifyChecksums): every page that carries a crc is checked, CRC-32 (IEEE) of
//     the page as written after its header, so a flipped bit cannot load silently.
//
// A header that cannot be parsed stops the walk of that chunk without failing it: decoding will
// judge it.

// errCRC reports a page whose checksum does not match.
type errCRC struct {
	column string
	offset int64
}

func (e *errCRC) Error() string {
	return fmt.Sprintf("column %s: the page at byte %d fails its checksum", e.column, e.offset)
}

func (e *errCRC) Unwrap() error { return ErrCorrupt }

// PageTooLargeError is the error for a Parquet page whose uncompressed size is over the page limit
// (WithMaxPageBytes). The file is not corrupt: it can be read with a larger limit, given the memory.
type PageTooLargeError struct {
	Path     string
	Column   string // the column's dotted path in the Parquet schema, such as "m.key_value.value"
	RowGroup int
	Size     int64 // the page's uncompressed size
	Limit    int64
}

// Error renders the file, column, row group, page size and limit:
// `data.parquet: column "m.key_value.value" row group 0: page of 1234567890 bytes exceeds the page
// limit of 1073741824 bytes`.
func (e *PageTooLargeError) Error() string {
	return fmt.Sprintf("%s: column %q row group %d: page of %d bytes exceeds the page limit of %d bytes",
		e.Path, e.Column, e.RowGroup, e.Size, e.Limit)
}

func (e *PageTooLargeError) filePath() string { return e.Path }

// checkRowGroupPages checks the pages of row group unit (rg) of the file at path (r, size bytes):
// their uncompressed sizes against maxPage and, with crc, their checksums. It returns the largest
// uncompressed page size it saw, and whether the footer's uncompressed size of every column chunk
// is borne out by its pages (sizesTrue; see footerSizeTrue), so that buffers may be sized from it.
func checkRowGroupPages(r io.ReaderAt, size int64, rg *metadata.RowGroupMetaData, path string, unit int, crc bool, maxPage int64) (largest int64, sizesTrue bool, err error) {
	w := new(pageWalker) // one window for every chunk of the row group
	sizesTrue = true
	for c := 0; c < rg.NumColumns(); c++ {
		cc, err := rg.ColumnChunk(c)
		if err != nil {
			return largest, false, nil // decoding will report it
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
			start = cc.DictionaryPageOffset()
		}
		length := cc.TotalCompressedSize()
		if start < 0 || length <= 0 || start+length > size {
			sizesTrue = false
			continue
		}
		column := cc.PathInSchema().String()
		big, err := w.walk(r, start, length, column, crc, maxPage)
		if err != nil {
			return largest, false, err
		}
		if big > maxPage {
			if total := cc.TotalUncompressedSize(); total > 0 && big > total {
				return largest, false, fmt.Errorf("%w: column %s: a page header claims %d uncompressed bytes, more than the %d of its column chunk",
					ErrCorrupt, column, big, total)
			}
			return largest, false, &PageTooLargeError{Path: path, Column: column, RowGroup: unit, Size: big, Limit: maxPage}
		}
		largest = max(largest, big)
		sizesTrue = sizesTrue && w.complete && footerSizeTrue(cc.TotalUncompressedSize(), w.uncompressed)
	}
	return largest, sizesTrue, nil
}

// footerSizeTrue reports whether a column chunk's uncompressed size in the footer (which counts
// its pages and their headers) is no more than its pages' walked, give or take what writers add:
// a footer that claims far more must not size a buffer.
func footerSizeTrue(footer, walked int64) bool {
	return footer <= walked+walked/8+64<<10
}

// walkChunk walks the pages of the column chunk at [start, start+length) of r. It returns the
// largest uncompressed page size, stopping at the first page over maxPage; with crc it verifies
// every checksummed page before it.
func walkChunk(r io.ReaderAt, start, length int64, column string, crc bool, maxPage int64) (int64, error) {
	return new(pageWalker).walk(r, start, length, column, crc, maxPage)
}

// pageWalker holds walkChunk's buffers, so that the chunks of a row group share them, and what its
// last walk saw.
type pageWalker struct {
	window, body [64 << 10]byte
	uncompressed int64 // the last walk's pages, uncompressed, with their headers
	complete     bool  // the last walk reached the end of its chunk
}

// walk is walkChunk with wk's buffers.
func (wk *pageWalker) walk(r io.ReaderAt, start, length int64, column string, crc bool, maxPage int64) (int64, error) {
	// Stream the chunk: page headers are parsed from a small window, which is read again only when
	// a header is not inside it (small pages share one read); bodies are hashed as they are read,
	// starting with the part the window already holds, so memory stays bounded whatever the chunk
	// size and each byte is read once.
	window, body := wk.window[:], wk.body[:]
	wk.uncompressed, wk.complete = 0, false
	var (
		w       []byte // window's valid bytes, which start at chunk offset wpos
		wpos    int64
		largest int64
	)
	for pos := int64(0); pos < length; {
		h, hl, ok := pageHeader{}, 0, false
		if w != nil && pos >= wpos && pos < wpos+int64(len(w)) {
			h, hl, ok = parsePageHeader(w[pos-wpos:])
		}
		if !ok {
			wpos, w = pos, window[:min(int64(len(window)), length-pos)]
			n, err := r.ReadAt(w, start+pos)
			if n < len(w) && err != nil {
				return largest, nil
			}
			if h, hl, ok = parsePageHeader(w); !ok {
				return largest, nil
			}
		}
		if h.compressed < 0 || pos+int64(hl)+int64(h.compressed) > length {
			return largest, nil
		}
		if u := int64(h.uncompressed); u > largest {
			largest = u
			if u > maxPage {
				return largest, nil
			}
		}
		if crc && h.hasCRC {
			from := pos - wpos + int64(hl) // the body's first byte in w
			head := w[min(from, int64(len(w))):min(int64(len(w)), from+int64(h.compressed))]
			sum := crc32.ChecksumIEEE(head)
			off, rest := start+pos+int64(hl)+int64(len(head)), int64(h.compressed)-int64(len(head))
			for rest > 0 {
				b := body[:min(int64(len(body)), rest)]
				if n, _ := r.ReadAt(b, off); n < len(b) {
					return largest, nil
				}
				sum = crc32.Update(sum, crc32.IEEETable, b)
				off, rest = off+int64(len(b)), rest-int64(len(b))
			}
			if sum != uint32(h.crc) {
				return largest, &errCRC{column: column, offset: start + pos}
			}
		}
		pos += int64(hl) + int64(h.compressed)
		wk.uncompressed += int64(hl) + int64(h.uncompressed)
	}
	wk.complete = true
	return largest, nil
}

type pageHeader struct {
	uncompressed int32
	compressed   int32
	crc          int32
	hasCRC       bool
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
		case id == 2 && t == 5:
			h.uncompressed = int32(c.zigzag())
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
