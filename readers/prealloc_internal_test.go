package readers

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/loaderproject/loader/internal/fixture"
)

// TestFooterSizesTrue checks that the footer sizes of files arrow-go writes are borne out by their
// pages, so that string buffers are sized up front for them (PreAllocBinaryData), whatever the
// encoding and page size.
func TestFooterSizesTrue(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "few", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for i := 0; i < 30_000; i++ {
		if i%9 == 0 {
			b.Field(0).AppendNull()
			b.Field(2).AppendNull()
		} else {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("value %d of a column", i*7919))
			b.Field(2).(*array.Int64Builder).Append(int64(i))
		}
		b.Field(1).(*array.StringBuilder).Append([]string{"a", "bb", "ccc"}[i%3])
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	for _, tc := range []struct {
		name  string
		props *parquet.WriterProperties
	}{
		{"dictionary, snappy", parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithMaxRowGroupLength(10_000))},
		{"plain, small pages", parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(4<<10), parquet.WithMaxRowGroupLength(10_000))},
		{"data page v2, zstd", parquet.NewWriterProperties(parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithCompression(compress.Codecs.Zstd))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.parquet")
			if err := fixture.WriteParquetRecord(path, rec, tc.props); err != nil {
				t.Fatal(err)
			}
			r, err := file.OpenParquetFile(path, false)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			st, _ := fh.Stat()
			for rg := 0; rg < r.NumRowGroups(); rg++ {
				_, sizesTrue, err := checkRowGroupPages(fh, st.Size(), r.MetaData().RowGroup(rg), path, rg, true, DefaultMaxPageBytes)
				if err != nil || !sizesTrue {
					t.Errorf("checkRowGroupPages(row group %d) = sizes true %v, %v; want true, nil", rg, sizesTrue, err)
				}
			}
			if err := readAll(path); err != nil {
				t.Errorf("read = %v", err)
			}
		})
	}
}

func TestFooterSizeTrue(t *testing.T) {
	for _, tc := range []struct {
		footer, walked int64
		want           bool
	}{
		{100, 100, true},
		{50, 100, true},                  // the footer claims less: buffers grow as before
		{100 + 64<<10, 100, true},        // a writer's slack
		{1 << 20, 1 << 20 * 9 / 8, true}, // within an eighth
		{2 << 20, 1 << 20, false},
		{1 << 40, 1 << 20, false}, // a lie
	} {
		if got := footerSizeTrue(tc.footer, tc.walked); got != tc.want {
			t.Errorf("footerSizeTrue(%d, %d) = %v; want %v", tc.footer, tc.walked, got, tc.want)
		}
	}
}
