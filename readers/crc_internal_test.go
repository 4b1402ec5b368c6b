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
	"github.com/apache/arrow-go/v18/parquet/file"
)

// TestPageChecksum flips one byte inside a checksummed page of a valid corpus file: the read must
// fail naming the column, and only because of the check.
func TestPageChecksum(t *testing.T) {
	orig := "../../shared/corpus/parquet-testing/data/datapage_v1-uncompressed-checksum.parquet"
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Skipf("corpus not present: %v", err)
	}
	r, err := file.OpenParquetFile(orig, false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := r.MetaData().RowGroup(0).ColumnChunk(0)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	start := cc.DataPageOffset()
	h, n, ok := parsePageHeader(data[start:])
	if !ok || !h.hasCRC || h.compressed < 8 {
		t.Fatalf("first page header = %+v, %d, %t; want a checksummed page", h, n, ok)
	}
	read := func(path string, opts ...Option) error {
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
	if err := read(orig); err != nil {
		t.Fatalf("valid checksummed file: %v", err)
	}
	bad := append([]byte(nil), data...)
	bad[start+int64(n)+int64(h.compressed)-2] ^= 0x40 // a value byte, not a level
	path := filepath.Join(t.TempDir(), "flipped.parquet")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	err = read(path)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "fails its checksum") || !strings.Contains(err.Error(), path) {
		t.Errorf("flipped page = %v; want a checksum error naming the file", err)
	}
	if err := read(path, WithVerifyChecksums(false)); err != nil {
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

// TestChunkChecksumAcrossWindows checks pages larger than the 64 KiB window verifyChunkCRC reads
// headers through: a good chunk of three pages passes, and a flipped byte far into any page's body
// fails naming that page.
func TestChunkChecksumAcrossWindows(t *testing.T) {
	zigzag := func(b []byte, v int32) []byte { return binary.AppendUvarint(b, uint64(uint32(v<<1)^uint32(v>>31))) }
	var chunk []byte
	var pages, bodies []int64
	for i, size := range []int{200_000, 10, 70_000} {
		body := make([]byte, size)
		for k := range body {
			body[k] = byte(k*7 + i)
		}
		pages = append(pages, int64(len(chunk)))
		// PageHeader: 1: type, 2: uncompressed size, 3: compressed size, 4: crc (i32 each), stop
		h := []byte{0x15}
		h = zigzag(h, 0)
		h = append(h, 0x15)
		h = zigzag(h, int32(size))
		h = append(h, 0x15)
		h = zigzag(h, int32(size))
		h = append(h, 0x15)
		h = zigzag(h, int32(crc32.ChecksumIEEE(body)))
		h = append(h, 0)
		chunk = append(chunk, h...)
		bodies = append(bodies, int64(len(chunk)))
		chunk = append(chunk, body...)
	}
	check := func(b []byte) error { return verifyChunkCRC(bytes.NewReader(b), 0, int64(len(b)), "c") }
	if err := check(chunk); err != nil {
		t.Fatalf("verifyChunkCRC(good chunk) = %v", err)
	}
	for i, at := range []int64{bodies[0] + 150_000, bodies[1] + 9, bodies[2] + 69_000} {
		bad := append([]byte(nil), chunk...)
		bad[at] ^= 1
		var ce *errCRC
		if err := check(bad); !errors.As(err, &ce) || ce.offset != pages[i] {
			t.Errorf("verifyChunkCRC(byte %d flipped) = %v; want a checksum error for the page at %d", at, err, pages[i])
		}
	}
}
