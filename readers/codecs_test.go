package readers_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/corpus"
	"github.com/loaderproject/loader/readers"
)

// Files arrow-go cannot read alone, read with the codecs RegisterParquetCodecs adds, against the
// values parquet-testing documents for them (and Arrow C++'s tests assert).
func TestParquetCodecsBeyondArrowGo(t *testing.T) {
	root := corpus.Root(t)
	tests := []struct {
		file string
		want string
	}{
		// Hadoop-framed LZ4 (codec 5); the values of Arrow C++'s TestHadoopLz4.
		{"hadoop_lz4_compressed.parquet",
			`c0: [1593604800 1593604800 1593604801 1593604801] c1: ["abc" "def" "abc" "def"] v11: [42 7.7 42.125 7.7]`},
		// A V2 data page with nothing compressed: one null FLOAT.
		{"datapage_v2_empty_datapage.snappy.parquet", "value: [(null)]"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			src := openDiscovered(t, filepath.Join(root, "parquet-testing", "data", tt.file), readers.WithAllocator(mem))
			defer src.Close()
			got := ""
			for _, u := range src.Units() {
				err := src.ReadUnit(context.Background(), u.Index, func(rec arrow.RecordBatch) error {
					for i, f := range rec.Schema().Fields() {
						if got != "" {
							got += " "
						}
						got += fmt.Sprintf("%s: %v", f.Name, rec.Column(i))
					}
					return nil
				})
				if err != nil {
					t.Fatalf("ReadUnit(%d): %v", u.Index, err)
				}
			}
			if got != tt.want {
				t.Errorf("%s read as\n  %s\nwant\n  %s", tt.file, got, tt.want)
			}
		})
	}
}
