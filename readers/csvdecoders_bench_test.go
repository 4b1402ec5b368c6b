package readers_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/loaderproject/loader/internal/bufpool"
	"github.com/loaderproject/loader/internal/gctune"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// csvBenchBytes is the size of the CSV text BenchmarkCSVDecoders decodes per iteration: one file of
// it, or 8 files of an eighth each.
const csvBenchBytes = 160 << 20

// writeBenchCSV writes a CSV file of about size bytes in the columns of csvBenchTable, with a quoted
// field holding the delimiter in every row, starting at id first. A file of at least size bytes
// already there is kept (see csvBenchDir).
func writeBenchCSV(b *testing.B, path string, size int64, first int) {
	b.Helper()
	if st, err := os.Stat(path); err == nil && st.Size() >= size {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	n, _ := w.WriteString("id,name,price,ts,ok,score\n")
	written := int64(n)
	for i := first; written < size; i++ {
		n, _ := fmt.Fprintf(w, "%d,\"customer %d, ltd\",%d.%02d,2024-01-02T03:04:%02d.123456Z,%t,%d.25\n", i, i, i%100000, i%100, i%60, i%2 == 0, i)
		written += int64(n)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// csvBenchDir names an environment variable: a directory where BenchmarkCSVDecoders keeps its
// generated files between runs (they are written once), for comparing runs without the time it
// takes to write them.
const csvBenchDir = "LOADER_CSV_BENCH_DIR"

const csvBenchTable = "id BIGINT, name STRING, price DECIMAL(12,2), ts TIMESTAMP, ok BOOLEAN, score DOUBLE"

// BenchmarkCSVDecoders decodes the same CSV text, as one file and as 8 files, with 1 and 2 decoders
// the way load's producer does: files are opened in order on one goroutine, and their units are
// read by an errgroup limited to the decoder count. Compare decoders=2 with decoders=1 for the
// scaling of one big file (split into units) and of many files (20 MiB each, whole). Bytes are the
// text's size; cpus is the CPU time the process used per second: on a shared machine, compare
// pairs of runs in which decoders=2 got close to 2. Each runs with loader load's GC settings and
// buffer pool.
func BenchmarkCSVDecoders(b *testing.B) {
	table, err := tableschema.ParseColumns(csvBenchTable)
	if err != nil {
		b.Fatal(err)
	}
	dir := os.Getenv(csvBenchDir)
	if dir == "" {
		dir = b.TempDir()
	}
	one := []string{filepath.Join(dir, "one.csv")}
	writeBenchCSV(b, one[0], csvBenchBytes, 0)
	var eight []string
	for i := range 8 {
		p := filepath.Join(dir, fmt.Sprintf("part-%d.csv", i))
		writeBenchCSV(b, p, csvBenchBytes/8, i*1_000_000)
		eight = append(eight, p)
	}
	for _, shape := range []struct {
		name  string
		paths []string
	}{{"files=1", one}, {"files=8", eight}} {
		for _, decoders := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/decoders=%d", shape.name, decoders), func(b *testing.B) {
				// As loader load runs: its GC settings (unless GOGC or GOMEMLIMIT is set) and a pool
				// of buffers that each batch's released buffers return to.
				restore, _ := gctune.ForLoad(loadInflightBytes, decoders, os.LookupEnv)
				defer restore()
				benchDecoders(b, shape.paths, decoders, readers.WithTable(table), readers.WithAllocator(bufpool.New()))
			})
		}
	}
}

// benchDecoders reads every unit of paths b.N times with at most decoders units at once.
func benchDecoders(b *testing.B, paths []string, decoders int, opts ...readers.Option) {
	b.Helper()
	var size int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		size += st.Size()
	}
	b.SetBytes(size)
	b.ReportAllocs()
	var rows atomic.Int64
	ctx := context.Background()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(decoders)
		var srcs []readers.Source
		for _, p := range paths {
			src, err := readers.Open(gctx, readers.File{Path: p}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			srcs = append(srcs, src)
			for _, u := range src.Units() {
				g.Go(func() error {
					return src.ReadUnit(gctx, u.Index, func(r arrow.RecordBatch) error { rows.Add(r.NumRows()); return nil })
				})
			}
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		for _, src := range srcs {
			src.Close()
		}
	}
	b.ReportMetric(float64(rows.Load())/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric((cpuTime(b)-cpu0).Seconds()/b.Elapsed().Seconds(), "cpus")
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadInflightBytes is loader load's default in-flight budget (load.DefaultMaxInflightBytes), which
// readers may not import.
const loadInflightBytes = 256 << 20
