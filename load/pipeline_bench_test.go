package load_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"

	"github.com/loaderproject/loader/internal/bufpool"
	"github.com/loaderproject/loader/internal/demodata"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
)

// BenchmarkPipeline measures the client-side stages of a load on the same Parquet files, each
// discarding its output, so that end-to-end runs can be compared with their ceilings:
//
//   - pqarrow: a plain pqarrow decode (default properties, one record reader per row group);
//   - decode: readers.Open and ReadUnit, as a load reads;
//   - cast: decode plus schemamatch's Plan.Apply to the table's canonical types (the decode-only
//     ceiling of a load: read, match, cast);
//   - encode: cast plus the partitioner's IPC frames.
//
// Row groups are read GOMAXPROCS at a time, as a load's decoders do, and the loader's stages allocate
// from a bufpool as a load does by default. The files are those of
// LOADER_BENCH_DIR (every *.parquet in it; the table is created like the first) or, without it, a
// small demodata set. Bytes are the files' on-disk size; cpu-s/GB is the process's user+system CPU
// per GB of it.
func BenchmarkPipeline(b *testing.B) {
	dir := os.Getenv("LOADER_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
		if _, err := demodata.Generate(context.Background(), dir, demodata.Options{Rows: 200_000, Files: 2}); err != nil {
			b.Fatal(err)
		}
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no Parquet files in %s (%v)", dir, err)
	}
	var size int64
	var files []readers.File
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		size += st.Size()
		files = append(files, readers.File{Path: p, Size: st.Size(), ModTime: st.ModTime(), Format: readers.FormatParquet})
	}
	first, err := readers.Open(context.Background(), files[0])
	if err != nil {
		b.Fatal(err)
	}
	table, err := tableschema.FromArrow(first.Schema())
	first.Close()
	if err != nil {
		b.Fatal(err)
	}
	stages := []struct {
		name string
		run  func(b *testing.B) int64 // returns rows
	}{
		{"pqarrow", func(b *testing.B) int64 { return benchPqarrow(b, paths) }},
		{"decode", func(b *testing.B) int64 { return benchStages(b, files, table, false, false) }},
		{"cast", func(b *testing.B) int64 { return benchStages(b, files, table, true, false) }},
		{"encode", func(b *testing.B) int64 { return benchStages(b, files, table, true, true) }},
	}
	for _, st := range stages {
		b.Run(st.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			cpu0 := cpuTime()
			start := time.Now()
			var rows int64
			for b.Loop() {
				rows += st.run(b)
			}
			el := time.Since(start)
			b.ReportMetric(float64(rows)/el.Seconds(), "rows/s")
			b.ReportMetric((cpuTime()-cpu0).Seconds()/(float64(size)*float64(b.N)/1e9), "cpu-s/GB")
		})
	}
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type unitJob struct {
	file int
	unit int
}

// forUnits runs fn on every unit of units, GOMAXPROCS at a time.
func forUnits(b *testing.B, units []unitJob, fn func(unitJob) error) {
	g, _ := errgroup.WithContext(context.Background())
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, u := range units {
		g.Go(func() error { return fn(u) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func benchPqarrow(b *testing.B, paths []string) int64 {
	var units []unitJob
	rdrs := make([]*file.Reader, len(paths))
	for i, p := range paths {
		r, err := file.OpenParquetFile(p, false)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		rdrs[i] = r
		for rg := 0; rg < r.NumRowGroups(); rg++ {
			units = append(units, unitJob{i, rg})
		}
	}
	var rows atomic.Int64
	forUnits(b, units, func(u unitJob) error {
		fr, err := pqarrow.NewFileReader(rdrs[u.file], pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			return err
		}
		rr, err := fr.GetRecordReader(context.Background(), nil, []int{u.unit})
		if err != nil {
			return err
		}
		defer rr.Release()
		for rr.Next() {
			rows.Add(rr.RecordBatch().NumRows())
		}
		return rr.Err()
	})
	return rows.Load()
}

func benchStages(b *testing.B, files []readers.File, table *tableschema.Schema, cast, encode bool) int64 {
	ctx := context.Background()
	mem := bufpool.New() // as a load's default allocator
	srcs := make([]readers.Source, len(files))
	plans := make([]*schemamatch.Plan, len(files))
	var units []unitJob
	for i, f := range files {
		src, err := readers.Open(ctx, f, readers.WithTable(table), readers.WithAllocator(mem))
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		srcs[i] = src
		if plans[i], err = schemamatch.NewPlan(src.Schema(), table, schemamatch.WithAllocator(mem)); err != nil {
			b.Fatal(err)
		}
		for _, u := range src.Units() {
			units = append(units, unitJob{i, u.Index})
		}
	}
	enc, err := partitioner.NewEncoder(table.Arrow(), partitioner.DefaultMaxFrameBytes, partitioner.WithAllocator(mem))
	if err != nil {
		b.Fatal(err)
	}
	var rows atomic.Int64
	forUnits(b, units, func(u unitJob) error {
		return srcs[u.file].ReadUnit(ctx, u.unit, func(rec arrow.RecordBatch) error {
			rows.Add(rec.NumRows())
			if !cast {
				return nil
			}
			out, err := plans[u.file].Apply(rec)
			if err != nil {
				return err
			}
			defer out.Release()
			if !encode {
				return nil
			}
			return enc.Encode(out, partitioner.Span{File: u.file, Unit: u.unit}, func(*partitioner.Frame) error { return nil })
		})
	})
	return rows.Load()
}
