package readers_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// FuzzCSV runs arbitrary bytes through the CSV path, with and without a table and in several
// dialects: every outcome is rows or an error wrapping ErrBadRow or ErrCorrupt, never a panic, a
// leak, or more rows than the input has lines.
func FuzzCSV(f *testing.F) {
	f.Add([]byte("id,name,price\n1,a,1.50\n2,\"b,\"\"c\"\"\",\n"), uint8(0))
	f.Add([]byte("\xEF\xBB\xBFid;name\r\n1;'x\\'y'\r\n"), uint8(6))
	f.Add([]byte("id,ts,day,tags\n1,2024-01-02T03:04:05Z,2024-01-02,\"[1,2]\"\n"), uint8(1))
	f.Add([]byte("1,2,3\n4,5\n"), uint8(8))
	f.Add([]byte("a,b\n\"unterminated\n"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		if len(data) > 1<<16 {
			return
		}
		path := filepath.Join(t.TempDir(), "f.csv")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		o := readers.CSVOptions{MaxRecordBytes: 4096}
		fuzzDialect(&o, flags)
		if flags&16 != 0 {
			o.NullValues, o.StringNulls = []string{"", "NULL"}, true
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		opts := []readers.Option{readers.WithAllocator(mem), readers.WithCSV(o), readers.WithBatchBytes(256)}
		if flags&1 != 0 {
			table, err := tableschema.ParseColumns("id BIGINT, name STRING, price DECIMAL(6,2), ts TIMESTAMP, day DATE, tags ARRAY<INT>, ok BOOLEAN, f FLOAT")
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, readers.WithTable(table))
		}
		src, err := readers.Open(context.Background(), readers.File{Path: path, Format: readers.FormatCSV}, opts...)
		if err != nil {
			checkErr(t, err)
			return
		}
		defer src.Close()
		var rows int64
		err = src.ReadUnit(context.Background(), 0, func(rec arrow.RecordBatch) error {
			rows += rec.NumRows()
			if !rec.Schema().Equal(src.Schema()) {
				t.Fatalf("batch schema differs from Schema()")
			}
			return nil
		})
		if err != nil {
			checkErr(t, err)
			return
		}
		if lines := int64(bytes.Count(data, []byte("\n"))) + 1; rows > lines {
			t.Fatalf("%d rows from %d lines", rows, lines)
		}
	})
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, readers.ErrBadRow) || errors.Is(err, readers.ErrCorrupt) {
		return
	}
	// option and header problems are plain errors naming the file
	if bytes.Contains([]byte(err.Error()), []byte("f.csv")) {
		return
	}
	t.Fatalf("unexpected error %v", err)
}

// FuzzBinaryFormats mutates small valid Parquet and Arrow IPC files: every mutation must read fine
// or fail with an error (wrapping ErrCorrupt), never panic past the guard or leak.
func FuzzBinaryFormats(f *testing.F) {
	dir := f.TempDir()
	rec := testRecord(f, memory.NewGoAllocator(), 0, 20)
	defer rec.Release()
	for i, name := range []string{"s.parquet", "s.arrow", "s.arrows"} {
		path := filepath.Join(dir, name)
		switch i {
		case 0:
			writeParquet(f, path, []arrow.RecordBatch{rec}, 8)
		case 1:
			writeIPC(f, path, []arrow.RecordBatch{rec}, false)
		case 2:
			writeIPC(f, path, []arrow.RecordBatch{rec}, true)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		if len(data) > 1<<20 {
			return
		}
		format := []readers.Format{readers.FormatParquet, readers.FormatIPCFile, readers.FormatIPCStream}[int(kind)%3]
		if os.Getenv("READERS_FUZZ_WATCHDOG") != "" {
			// debugging aid: an input that runs for long panics with every stack, so the fuzzer
			// keeps it
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				deadline := time.After(5 * time.Second)
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						var ms runtime.MemStats
						runtime.ReadMemStats(&ms)
						if ms.HeapAlloc < 1<<30 {
							continue
						}
					case <-deadline:
					}
					buf := make([]byte, 1<<20)
					panic("slow or large input:\n" + string(buf[:runtime.Stack(buf, true)]))
				}
			}()
		}
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		src, err := readers.Open(context.Background(), readers.File{Path: path, Format: format}, readers.WithAllocator(mem), readers.WithMaxAllocation(64<<20))
		if err == nil {
			for _, u := range src.Units() {
				if err = src.ReadUnit(context.Background(), u.Index, func(arrow.RecordBatch) error { return nil }); err != nil {
					break
				}
			}
			src.Close()
		}
		if err != nil && !errors.Is(err, readers.ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
	})
}

// fuzzDialect applies the dialect bits the CSV fuzzers share: 2 a ';' delimiter with ' quotes and
// \ escapes, 4 '#' comments and lazy quotes, 8 no header with ragged rows.
func fuzzDialect(o *readers.CSVOptions, flags uint8) {
	if flags&2 != 0 {
		o.Delimiter, o.Quote, o.Escape = ';', '\'', '\\'
	}
	if flags&4 != 0 {
		o.Comment = '#'
		o.LazyQuotes = true
	}
	if flags&8 != 0 {
		o.NoHeader, o.AllowRagged = true, true
	}
}
