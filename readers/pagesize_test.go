package readers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/loaderproject/loader/readers"
)

// writeLargePage writes a Parquet file whose string column s is one zstd page of about 2.8 MiB
// uncompressed (no dictionary), which compresses to far less, as real files with huge pages do. It
// returns the values written, null for every seventh row.
func writeLargePage(t *testing.T, path string) []*string {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewStringBuilder(memory.NewGoAllocator())
	defer b.Release()
	var want []*string
	for i := range 3000 {
		if i%7 == 3 {
			b.AppendNull()
			want = append(want, nil)
			continue
		}
		v := fmt.Sprintf("%06d:%s", i, strings.Repeat("x", 1100))
		b.Append(v)
		want = append(want, &v)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(64<<20),
		parquet.WithBatchSize(1<<20), parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(1<<20))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

func TestMaxPageBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "large-page.parquet")
	want := writeLargePage(t, path)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 1<<20 {
		t.Fatalf("the file takes %d bytes; want it well compressed (under 1 MiB)", st.Size())
	}
	const mib = 1 << 20

	read := func(t *testing.T, opts ...readers.Option) ([]*string, error) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src, err := readers.Open(context.Background(), readers.File{Path: path}, append(opts, readers.WithAllocator(mem))...)
		if err != nil {
			return nil, err
		}
		defer src.Close()
		var got []*string
		for _, u := range src.Units() {
			err := src.ReadUnit(context.Background(), u.Index, func(rec arrow.RecordBatch) error {
				col := rec.Column(0).(*array.String)
				for i := 0; i < col.Len(); i++ {
					if col.IsNull(i) {
						got = append(got, nil)
						continue
					}
					v := col.Value(i)
					got = append(got, &v)
				}
				return nil
			})
			if err != nil {
				return got, err
			}
		}
		return got, nil
	}
	same := func(t *testing.T, got []*string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("read %d rows; want %d", len(got), len(want))
		}
		for i := range want {
			if (got[i] == nil) != (want[i] == nil) || got[i] != nil && *got[i] != *want[i] {
				t.Fatalf("row %d = %v; want %v", i, got[i], want[i])
			}
		}
	}

	t.Run("over the page limit", func(t *testing.T) {
		for _, crc := range []bool{true, false} {
			_, err := read(t, readers.WithMaxPageBytes(mib), readers.WithVerifyChecksums(crc))
			var pe *readers.PageTooLargeError
			if !errors.As(err, &pe) {
				t.Fatalf("read with a 1 MiB page limit (checksums %t) = %v; want a *PageTooLargeError", crc, err)
			}
			if pe.Path != path || pe.Column != "s" || pe.RowGroup != 0 || pe.Limit != mib || pe.Size < 2*mib || pe.Size > 4*mib {
				t.Errorf("PageTooLargeError = %+v; want {%s s 0 ~2.8MiB %d}", *pe, path, mib)
			}
			if errors.Is(err, readers.ErrCorrupt) {
				t.Errorf("read = %v; want it not to be ErrCorrupt (the file is valid)", err)
			}
			var fe *readers.FileError
			if !errors.As(err, &fe) || fe.Path != path || fe.Unit != 0 {
				t.Errorf("read = %v; want it wrapped in a *FileError for row group 0", err)
			}
			wantMsg := fmt.Sprintf(`%s: column "s" row group 0: page of %d bytes exceeds the page limit of %d bytes`, path, pe.Size, mib)
			if err.Error() != wantMsg {
				t.Errorf("Error() = %q; want %q", err, wantMsg)
			}
		}
	})
	t.Run("within the page limit, over the allocation cap", func(t *testing.T) {
		// The page's values need buffers over a 1 MiB cap: a page the limit lets through raises
		// the cap for its row group rather than failing as a corrupt length.
		for _, opts := range [][]readers.Option{
			{readers.WithMaxAllocation(mib)},
			{readers.WithMaxAllocation(mib), readers.WithMaxPageBytes(4 * mib)},
		} {
			got, err := read(t, opts...)
			if err != nil {
				t.Fatalf("read with a 1 MiB allocation cap = %v", err)
			}
			same(t, got)
		}
	})
	t.Run("default page limit", func(t *testing.T) {
		got, err := read(t)
		if err != nil {
			t.Fatalf("read = %v", err)
		}
		same(t, got)
	})
	t.Run("bad values keep the default", func(t *testing.T) {
		for _, n := range []int64{0, -1} {
			got, err := read(t, readers.WithMaxPageBytes(n))
			if err != nil {
				t.Fatalf("read with WithMaxPageBytes(%d) = %v", n, err)
			}
			same(t, got)
		}
	})
}
