package readers_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/bufpool"
	"github.com/loaderproject/loader/internal/corpus"
	"github.com/loaderproject/loader/internal/demodata"
	"github.com/loaderproject/loader/readers"
)

// The corpus, what is known about it and arrow-go's plain readers are in internal/corpus.

// corpusDir returns the corpus directory rel (slash-separated), or skips the test when it is absent.
func corpusDir(t *testing.T, rel string) string { return corpus.Dir(t, rel) }

// readAll reads every unit of a source and returns the batches as a table.
func readAll(t *testing.T, ctx context.Context, src readers.Source) (arrow.Table, error) {
	t.Helper()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, u := range src.Units() {
		var rows int64
		err := src.ReadUnit(ctx, u.Index, func(rec arrow.RecordBatch) error {
			if !rec.Schema().Equal(src.Schema()) {
				t.Errorf("batch schema %s differs from Schema() %s", rec.Schema(), src.Schema())
			}
			rows += rec.NumRows()
			rec.Retain()
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if u.Rows >= 0 && rows != u.Rows {
			t.Errorf("unit %d: %d rows; Units() said %d", u.Index, rows, u.Rows)
		}
	}
	return array.NewTableFromRecords(src.Schema(), recs), nil
}

func tablesEqual(a, b arrow.Table) bool {
	if a.NumRows() != b.NumRows() || a.NumCols() != b.NumCols() {
		return false
	}
	for i := 0; i < int(a.NumCols()); i++ {
		ca, cb := a.Column(i).Data(), b.Column(i).Data()
		if isINT96Pair(ca.DataType(), cb.DataType()) {
			// the loader reads INT96 as microseconds, arrow-go as nanoseconds
			cb = nanosToMicros(cb)
			defer cb.Release()
		}
		if !arrow.TypeEqual(ca.DataType(), cb.DataType()) {
			return false
		}
		if ca.Len() == 0 {
			continue
		}
		x, err1 := array.Concatenate(ca.Chunks(), memory.DefaultAllocator)
		y, err2 := array.Concatenate(cb.Chunks(), memory.DefaultAllocator)
		if err1 != nil || err2 != nil { // arrow-go cannot concatenate unions
			if x != nil {
				x.Release()
			}
			if y != nil {
				y.Release()
			}
			if !array.ChunkedEqual(ca, cb) {
				return false
			}
			continue
		}
		eq := array.Equal(x, y) || array.ApproxEqual(x, y, array.WithNaNsEqual(true), array.WithAbsTolerance(0))
		x.Release()
		y.Release()
		if !eq {
			return false
		}
	}
	return true
}

func TestCorpusValidFiles(t *testing.T) {
	for _, cf := range corpus.Valid(t) {
		path, format := cf.Path, cf.Format
		t.Run(filepath.Base(path), func(t *testing.T) {
			got, release, err := readCorpusFile(t, context.Background(), readers.File{Path: path, Format: format}, path, readers.WithBatchBytes(64<<10))
			defer release()
			if why, known := corpus.KnownUnreadable[cf.Name()]; known {
				if err == nil {
					t.Fatalf("read fine; the test expects it to fail (%s): update knownUnreadable", why)
				}
				if !errors.Is(err, readers.ErrCorrupt) || !strings.Contains(err.Error(), path) {
					t.Errorf("error %q: want ErrCorrupt naming the file", err)
				}
				if strings.Contains(why, "encrypted") && !errors.Is(err, readers.ErrEncrypted) {
					t.Errorf("error %q: want ErrEncrypted", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read = %v", err)
			}
			want, perr := corpus.ReadPlain(path, format, memory.NewGoAllocator())
			if exp, ok := corpus.BeyondArrowGo[cf.Name()]; ok {
				// arrow-go cannot read it: check the values the file's documentation gives.
				if perr == nil {
					want.Release()
				}
				col := got.Column(0).Data().Chunk(0).(*array.Timestamp)
				var vals []any
				for i := 0; i < col.Len(); i++ {
					if col.IsNull(i) {
						vals = append(vals, nil)
					} else {
						vals = append(vals, int64(col.Value(i)))
					}
				}
				if g, w := fmt.Sprint(vals), fmt.Sprint(exp); g != w {
					t.Errorf("values = %s; want %s", g, w)
				}
				return
			}
			if perr != nil {
				t.Fatalf("arrow-go's plain reader fails where ours succeeds: %v", perr)
			}
			defer want.Release()
			if got.NumRows() != want.NumRows() {
				t.Fatalf("rows = %d; arrow-go reads %d", got.NumRows(), want.NumRows())
			}
			if !tablesEqual(got, want) {
				t.Errorf("values differ from arrow-go's plain reader")
			}
		})
	}
}

// TestCorpusBadFiles runs every corrupt and fuzzer-found file through Open and ReadUnit: each must
// end in an error wrapping ErrCorrupt (or read fine), never a panic or a hang, and leak nothing.
func TestCorpusBadFiles(t *testing.T) {
	for _, cf := range corpus.Bad(t) {
		path, format := cf.Path, cf.Format
		t.Run(filepath.Base(filepath.Dir(path))+"/"+cf.Name(), func(t *testing.T) {
			_, release, err := readCorpusFile(t, context.Background(), readers.File{Path: path, Format: format}, path)
			defer release()
			if err == nil {
				return // some fuzz cases are valid files
			}
			if !errors.Is(err, readers.ErrCorrupt) {
				t.Errorf("error %q does not wrap ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// readCorpusFile opens f and reads every unit with a checked allocator: the rows as a table (nil
// after an error), and a func that releases it and checks that every buffer is back, unless
// arrow-go's own reader leaks on path (the file on disk; f may be its copy in a bucket).
func readCorpusFile(t *testing.T, ctx context.Context, f readers.File, path string, opts ...readers.Option) (arrow.Table, func(), error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	format := f.Format
	src, err := readers.Open(ctx, f, append(opts, readers.WithAllocator(mem))...)
	var tbl arrow.Table
	if err == nil {
		format = src.File().Format
		tbl, err = readAll(t, ctx, src)
		src.Close()
	}
	if err != nil && tbl != nil {
		tbl.Release()
		tbl = nil
	}
	release := func() {
		if tbl != nil {
			tbl.Release()
		}
		if n := mem.CurrentAlloc(); n != 0 && !corpus.PlainLeaks(path, format) {
			t.Errorf("%s: %d bytes still allocated after the read (arrow-go's plain reader leaks nothing here)", f.Path, n)
		}
	}
	return tbl, release, err
}

func isINT96Pair(ours, plain arrow.DataType) bool {
	o, ok1 := ours.(*arrow.TimestampType)
	p, ok2 := plain.(*arrow.TimestampType)
	return ok1 && ok2 && o.Unit == arrow.Microsecond && p.Unit == arrow.Nanosecond && o.TimeZone == p.TimeZone
}

func nanosToMicros(c *arrow.Chunked) *arrow.Chunked {
	var out []arrow.Array
	dt := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: c.DataType().(*arrow.TimestampType).TimeZone}
	for _, ch := range c.Chunks() {
		ts := ch.(*array.Timestamp)
		b := array.NewTimestampBuilder(memory.DefaultAllocator, dt)
		for i := 0; i < ts.Len(); i++ {
			if ts.IsNull(i) {
				b.AppendNull()
				continue
			}
			v := int64(ts.Value(i))
			q := v / 1000
			if v%1000 < 0 {
				q--
			}
			b.Append(arrow.Timestamp(q))
		}
		out = append(out, b.NewArray())
		b.Release()
	}
	res := arrow.NewChunked(dt, out)
	for _, a := range out {
		a.Release()
	}
	return res
}

// TestCorpusReusedMemory reads every valid corpus file through a buffer pool, the allocator a load
// gives its readers, after filling the pool with freed buffers of garbage: the values must be those
// of the same file read with fresh memory. The pool zeroes what it hands out again, which arrow-go's
// Parquet decoders rely on (TestDemoDataReusedMemory fails without it), and a reader that kept using
// a buffer it had released would read another batch's bytes.
func TestCorpusReusedMemory(t *testing.T) {
	ctx := context.Background()
	for _, cf := range corpus.Valid(t) {
		if _, known := corpus.KnownUnreadable[cf.Name()]; known {
			continue
		}
		f := readers.File{Path: cf.Path, Format: cf.Format}
		t.Run(filepath.Base(cf.Path), func(t *testing.T) {
			checkReusedMemory(t, ctx, f, readers.WithBatchBytes(64<<10))
		})
	}
}

// checkReusedMemory reads f with fresh memory, then through a buffer pool filled with freed garbage
// (poison), and checks that both reads give the same values.
func checkReusedMemory(t *testing.T, ctx context.Context, f readers.File, opts ...readers.Option) {
	t.Helper()
	want, release, err := readCorpusFile(t, ctx, f, f.Path, opts...)
	defer release()
	if err != nil {
		t.Fatalf("read with fresh memory = %v", err)
	}
	pool := bufpool.New()
	poison(pool)
	src, err := readers.Open(ctx, f, append(opts, readers.WithAllocator(pool))...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, ctx, src)
	src.Close()
	if err != nil {
		t.Fatalf("read with reused memory = %v", err)
	}
	defer got.Release()
	if !tablesEqual(got, want) {
		t.Errorf("values read with reused memory differ from those read with fresh memory")
	}
}

// poison fills pool with freed buffers of every size class up to 4 MiB, each byte 0xA5.
func poison(pool *bufpool.Pool) {
	var bufs [][]byte
	for size := bufpool.MinClass; size <= 4<<20; size *= 2 {
		for range 8 {
			b := pool.Allocate(size)
			for i := range b {
				b[i] = 0xA5
			}
			bufs = append(bufs, b)
		}
	}
	for _, b := range bufs {
		pool.Free(b)
	}
}

// TestDemoDataReusedMemory is TestCorpusReusedMemory on the demo data in Parquet and Arrow IPC, plain
// and in the canonical types: files large enough that the decoders' buffers are the pool's (4 KiB and up),
// and, reused within the read, full of other rows' bytes.
func TestDemoDataReusedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 150,000 rows per file")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		format    demodata.Format
		canonical bool
	}{{demodata.Parquet, false}, {demodata.Parquet, true}, {demodata.IPC, false}, {demodata.IPC, true}} {
		t.Run(fmt.Sprintf("%s/canonical=%v", tc.format, tc.canonical), func(t *testing.T) {
			dir := t.TempDir()
			res, err := demodata.Generate(ctx, dir, demodata.Options{Rows: 150_000, Files: 1, RowGroupRows: 50_000, Format: tc.format, Canonical: tc.canonical})
			if err != nil {
				t.Fatal(err)
			}
			checkReusedMemory(t, ctx, readers.File{Path: res.Files[0]})
		})
	}
}
