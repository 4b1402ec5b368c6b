package main_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/loaderproject/loader/internal/fixture"
)

// TestPageLimit: a valid file with a page over --max-page-bytes fails naming the file, the page size
// and the limit, with a hint to raise it; raised, the same file loads.
func TestPageLimit(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for i := range 2000 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(strings.Repeat("y", 1000)) // ~2 MB in one page, compressed to little
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "huge-page.parquet")
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(64<<20),
		parquet.WithCompression(compress.Codecs.Zstd))
	if err := fixture.WriteParquetRecord(path, rec, props); err != nil {
		t.Fatal(err)
	}

	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", "id BIGINT NOT NULL, s STRING")
	r := loader(t, "load", "--table", tableName, "--warehouse", wh, "--max-page-bytes", "1MiB", path)
	if r.code != 1 || !strings.Contains(r.stderr, "huge-page.parquet") || !strings.Contains(r.stderr, "exceeds the page limit of 1048576 bytes") ||
		!strings.Contains(r.stderr, "hint: raise the page limit with --max-page-bytes") || strings.Contains(r.stderr, "corrupt") {
		t.Errorf("load with a 1 MiB page limit: exit %d, stderr %q; want 1, naming the file and the limit, with a hint, not corrupt", r.code, r.stderr)
	}
	s := parseSummary(t, mustLoader(t, "load", "--table", tableName, "--warehouse", wh, "--max-page-bytes", "8MiB", "--json", path).stdout)
	if s.Rows != 2000 || s.VerifiedRows == nil || *s.VerifiedRows != 2000 {
		t.Errorf("load with an 8 MiB page limit: %+v; want 2000 rows verified", s)
	}
}
