package readers

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/loaderproject/loader/internal/fixture"
)

// TestPageChecksum flips one byte inside a checksummed page of a valid corpus file: the read must
// fail naming the column, and only because of the check.
func TestPageChecksum(t *testing.T) {
	// internal/corpus imports this package, so the corpus is found here as it finds it
	root := os.Getenv("LOADER_CORPUS")
	if root == "" {
		root = "../../shared/corpus"
	}
	orig := filepath.Join(root, "parquet-testing/data/datapage_v1-uncompressed-checksum.parquet")
	if _, err := os.Stat(orig); err != nil {
		t.Skipf("corpus not present: %v", err)
	}
	data, start := firstDataPage(t, orig)
	h, n, ok := parsePageHeader(data[start:])
	if !ok || !h.hasCRC || h.compressed < 8 {
		t.Fatalf("first page header = %+v, %d, %t; want a checksummed page", h, n, ok)
	}
	if err := readAll(orig); err != nil {
		t.Fatalf("valid checksummed file: %v", err)
	}
	bad := append([]byte(nil), data...)
	bad[start+int64(n)+int64(h.compressed)-2] ^= 0x40 // a value byte, not a level
	path := filepath.Join(t.TempDir(), "flipped.parquet")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	err := readAll(path)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "fails its checksum") || !strings.Contains(err.Error(), path) {
		t.Errorf("flipped page = %v; want a checksum error naming the file", err)
	}
	if err := readAll(path, WithVerifyChecksums(false)); err != nil {
		t.Errorf("flipped page without the check = %v; want it to decode (the check is what catches it)", err)
	}
}

func TestParsePageHeaderGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {0x15}, {0x19, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x1c, 0x1c, 0x1c, 0x1c}} {
		if _, _, ok := parsePageHeader(b); ok {
			t.Errorf("parsePageHeader(%x) ok; want a failure", b)
		}
	}
}

// TestChunkChecksumAcrossWindows checks pages larger than the 64 KiB window walkChunk reads
// headers through: a good chunk of three pages passes, and a flipped byte far into any page's body
// fails naming that page.
func TestChunkChecksumAcrossWindows(t *testing.T) {
	var chunk []byte
	var pages, bodies []int64
	for i, size := range []int{200_000, 10, 70_000} {
		body := make([]byte, size)
		for k := range body {
			body[k] = byte(k*7 + i)
		}
		var page, at int64
		chunk, page, at = appendPage(chunk, int32(size), body)
		pages = append(pages, page)
		bodies = append(bodies, at)
	}
	if _, err := walkBytes(chunk, 1<<30); err != nil {
		t.Fatalf("walkChunk(good chunk) = %v", err)
	}
	for i, at := range []int64{bodies[0] + 150_000, bodies[1] + 9, bodies[2] + 69_000} {
		bad := append([]byte(nil), chunk...)
		bad[at] ^= 1
		var ce *errCRC
		if _, err := walkBytes(bad, 1<<30); !errors.As(err, &ce) || ce.offset != pages[i] {
			t.Errorf("walkChunk(byte %d flipped) = %v; want a checksum error for the page at %d", at, err, pages[i])
		}
	}
}

// TestWalkChunkSmallPages checks many small pages, whose headers the walk parses from one window
// read: every checksum is still verified, at the right page, and the largest page is reported.
func TestWalkChunkSmallPages(t *testing.T) {
	var chunk []byte
	var pages, bodies []int64
	largest := int64(0)
	for i := range 300 {
		size := 1 + (i*37)%700
		body := make([]byte, size)
		for k := range body {
			body[k] = byte(k*3 + i)
		}
		uncompressed := int32(size * 3) // as if compressed
		largest = max(largest, int64(uncompressed))
		var page, at int64
		chunk, page, at = appendPage(chunk, uncompressed, body)
		pages = append(pages, page)
		bodies = append(bodies, at)
	}
	if got, err := walkBytes(chunk, 1<<30); err != nil || got != largest {
		t.Fatalf("walkChunk(good chunk) = %d, %v; want %d, nil", got, err, largest)
	}
	for _, i := range []int{0, 1, 150, 299} {
		bad := append([]byte(nil), chunk...)
		bad[bodies[i]] ^= 1
		var ce *errCRC
		if _, err := walkBytes(bad, 1<<30); !errors.As(err, &ce) || ce.offset != pages[i] {
			t.Errorf("walkChunk(page %d flipped) = %v; want a checksum error for the page at %d", i, err, pages[i])
		}
	}
	// A page over maxPage stops the walk there (the page after it would fail its checksum).
	over := append([]byte(nil), chunk...)
	over[bodies[len(bodies)-1]] ^= 1
	if got, err := walkBytes(over, 100); err != nil || got <= 100 {
		t.Errorf("walkChunk(maxPage 100) = %d, %v; want the first page over 100 bytes, no error", got, err)
	}
}

// TestPageHeaderContradictsFooter rewrites a page header of a real file to claim more uncompressed
// bytes than its whole column chunk: over the page limit, that is a corrupt header, not a large
// page.
func TestPageHeaderContradictsFooter(t *testing.T) {
	dir := t.TempDir()
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	vals := make([]int64, 100)
	for i := range vals {
		vals[i] = int64(i) * 7
	}
	b := array.NewInt64Builder(memory.NewGoAllocator())
	b.AppendValues(vals, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 100)
	col.Release()
	defer rec.Release()
	path := filepath.Join(dir, "a.parquet")
	if err := fixture.WriteParquetRecord(path, rec, parquet.NewWriterProperties(parquet.WithDictionaryDefault(false))); err != nil {
		t.Fatal(err)
	}
	data, start := firstDataPage(t, path)
	h, _, ok := parsePageHeader(data[start:])
	if !ok || h.uncompressed != 800 || data[start+2] != 0x15 {
		t.Fatalf("page header = %+v (%x); want 800 uncompressed bytes, field 2 at byte 2", h, data[start:start+8])
	}
	// field 2 is zigzag(800) = 1600, two varint bytes; 8000 (zigzag 16000) takes two as well
	bad := append([]byte(nil), data...)
	enc := binary.AppendUvarint(nil, 16000)
	if len(enc) != 2 || bad[start+3]&0x80 == 0 || bad[start+4]&0x80 != 0 {
		t.Fatalf("unexpected varint layout %x", bad[start:start+8])
	}
	copy(bad[start+3:], enc)
	badPath := filepath.Join(dir, "bad.parquet")
	if err := os.WriteFile(badPath, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	err := readAll(badPath, WithMaxPageBytes(1000))
	var pe *PageTooLargeError
	if !errors.Is(err, ErrCorrupt) || errors.As(err, &pe) || !strings.Contains(err.Error(), "claims 8000 uncompressed bytes") {
		t.Errorf("read(header claiming 8000 bytes, limit 1000) = %v; want ErrCorrupt for the header", err)
	}
}

// appendPage appends a data page of body (uncompressed bytes when decompressed) to chunk, with its
// checksum, and returns the chunk and the offsets of the page's header and of its body.
func appendPage(chunk []byte, uncompressed int32, body []byte) (_ []byte, page, at int64) {
	zigzag := func(b []byte, v int32) []byte { return binary.AppendUvarint(b, uint64(uint32(v<<1)^uint32(v>>31))) }
	page = int64(len(chunk))
	// PageHeader: 1: type, 2: uncompressed size, 3: compressed size, 4: crc (i32 each), stop
	h := []byte{0x15}
	h = zigzag(h, 0)
	h = append(h, 0x15)
	h = zigzag(h, uncompressed)
	h = append(h, 0x15)
	h = zigzag(h, int32(len(body)))
	h = append(h, 0x15)
	h = zigzag(h, int32(crc32.ChecksumIEEE(body)))
	h = append(h, 0)
	chunk = append(chunk, h...)
	return append(chunk, body...), page, int64(len(chunk))
}

// walkBytes walks the column chunk b with checksums, as walkChunk does a file's.
func walkBytes(b []byte, maxPage int64) (int64, error) {
	return walkChunk(bytes.NewReader(b), 0, int64(len(b)), "c", true, maxPage)
}

// firstDataPage returns the bytes of the Parquet file at path and the offset of its first column
// chunk's first data page.
func firstDataPage(t *testing.T, path string) ([]byte, int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := r.MetaData().RowGroup(0).ColumnChunk(0)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	return data, cc.DataPageOffset()
}

// readAll opens path with opts and reads every unit, returning the first error.
func readAll(path string, opts ...Option) error {
	src, err := Open(context.Background(), File{Path: path}, opts...)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, u := range src.Units() {
		if err := src.ReadUnit(context.Background(), u.Index, func(arrow.RecordBatch) error { return nil }); err != nil {
			return err
		}
	}
	return nil
}
