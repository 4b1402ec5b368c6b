package load_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/tableschema"
)

// decodeConfig is a Decode of three Parquet files of 1000 rows into the fixture's table.
func decodeConfig(t *testing.T, mem memory.Allocator) load.Config {
	t.Helper()
	data := t.TempDir()
	for i := int64(0); i < 3; i++ {
		if err := fixture.WriteParquet(filepath.Join(data, "part-"+strconv.FormatInt(i, 10)+".parquet"), i*1000, 1000, 300); err != nil {
			t.Fatal(err)
		}
	}
	schema, err := tableschema.ParseColumns(fixture.TableColumns)
	if err != nil {
		t.Fatal(err)
	}
	return load.Config{Sources: []string{data}, Table: table, TableSchema: schema, Decoders: 2, Allocator: mem}
}

func TestDecodeCastsEveryRowWithoutATarget(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := decodeConfig(t, mem)
	want := cfg.TableSchema.Arrow()
	var rows, wrong atomic.Int64
	stats, err := load.Decode(context.Background(), cfg, func(rec arrow.RecordBatch) error {
		rows.Add(rec.NumRows())
		if !rec.Schema().Equal(want) {
			wrong.Add(1)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if stats.Rows != 3000 || stats.Files != 3 || rows.Load() != 3000 || stats.Elapsed <= 0 {
		t.Errorf("Decode() = %+v with %d rows seen; want 3000 rows of 3 files", stats, rows.Load())
	}
	if wrong.Load() > 0 {
		t.Errorf("%d batches are not in the table's canonical schema %s", wrong.Load(), want)
	}
}

func TestDecodeTakesTheFirstFilesColumnsByDefault(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := decodeConfig(t, mem)
	cfg.TableSchema = nil
	stats, err := load.Decode(context.Background(), cfg, nil)
	if err != nil || stats.Rows != 3000 {
		t.Fatalf("Decode(no table schema) = %+v, %v; want 3000 rows", stats, err)
	}
}

func TestDecodeStops(t *testing.T) {
	stop := errors.New("enough")
	tests := []struct {
		name   string
		cancel bool
		each   func(arrow.RecordBatch) error
		want   error
	}{
		{"pre-cancelled context", true, nil, context.Canceled},
		{"error from each", false, func(arrow.RecordBatch) error { return stop }, stop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not a checked allocator: a Parquet unit abandoned mid-way leaves arrow-go's column
			// readers' buffers to the garbage collector (readers' doc.go), which is not Decode's.
			cfg := decodeConfig(t, memory.DefaultAllocator)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			if _, err := load.Decode(ctx, cfg, tt.each); !errors.Is(err, tt.want) {
				t.Errorf("Decode() = %v; want %v", err, tt.want)
			}
		})
	}
}

func TestDecodeRefusesAMismatchedFile(t *testing.T) {
	cfg := decodeConfig(t, memory.DefaultAllocator)
	schema, err := tableschema.ParseColumns("id STRING NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	cfg.TableSchema, cfg.OnError = schema, load.OnErrorSkipFile // Decode stops at a bad file anyway
	if _, err := load.Decode(context.Background(), cfg, nil); err == nil {
		t.Error("Decode(a table the files do not fit) = nil error")
	}
}
