package load_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/internal/tcpproxy"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/readers"
)

// parquetBucket starts an S3 server, sets the environment to reach it, and puts files Parquet files
// of rows fixture rows each (ids counting up from 0) under s3://data/a/; it returns the server and a
// store to read through, closed when the test ends.
func parquetBucket(t *testing.T, files, rows int) (*s3test.Server, *objstore.Store) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "data")
	local := t.TempDir()
	for i := range files {
		if err := fixture.WriteParquet(filepath.Join(local, fmt.Sprintf("p%d.parquet", i)), int64(i*rows), int64(rows), 100); err != nil {
			t.Fatal(err)
		}
	}
	srv.PutDir(t, "data", "a/", local)
	st := objstore.New()
	t.Cleanup(func() { _ = st.Close() })
	return srv, st
}

// bucketConfig is a load of sources through st into a new embedded warehouse of the given columns,
// returned with the warehouse's directory.
func bucketConfig(t *testing.T, mem memory.Allocator, st *objstore.Store, columns string, sources ...string) (load.Config, string) {
	t.Helper()
	dir, _ := newWarehouse(t, columns)
	cfg := baseConfig(t, mem, sources...)
	cfg.Target, cfg.Objects = embeddedAt(dir), st
	return cfg, dir
}

// A listing that fails after the load has started (here a second source that matches nothing) fails
// the load with the listing's error; what was acknowledged stays acknowledged, and a re-run of the
// good source loads the rest exactly once.
func TestListingFailingPartWayResumesExactlyOnce(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const files, rows = 6, 500
	_, st := parquetBucket(t, files, rows)

	cfg, dir := bucketConfig(t, mem, st, fixture.TableColumns, "s3://data/a/", "s3://data/none/")
	first, err := load.Run(context.Background(), cfg)
	if !errors.Is(err, readers.ErrNoFiles) || first == nil {
		t.Fatalf("Run with a source matching nothing: %v; want ErrNoFiles with a summary", err)
	}
	cfg.Sources = cfg.Sources[:1]
	second := run(t, cfg)
	if first.Rows+second.Rows != files*rows {
		t.Errorf("runs acknowledged %d + %d rows; want %d in all", first.Rows, second.Rows, files*rows)
	}
	checkTable(t, dir, fixture.IDs(0, files*rows), fixture.Expected)
}

// TestEndpointFromURLParameters: an S3-compatible store named only by gocloud's URL parameters
// (?endpoint=...&use_path_style=true, no AWS_ENDPOINT_URL), as the README shows for MinIO, Ceph and R2:
// every file is listed and read through that endpoint, and the table holds the source's values.
func TestEndpointFromURLParameters(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const files, rows = 3, 400
	srv, st := parquetBucket(t, files, rows)
	t.Setenv("AWS_ENDPOINT_URL_S3", "") // the URL alone names the endpoint

	cfg, dir := bucketConfig(t, mem, st, fixture.TableColumns, "s3://data/a/?endpoint="+srv.Endpoint+"&use_path_style=true")
	sum := run(t, cfg)
	if sum.Files != files || sum.Rows != files*rows {
		t.Errorf("loaded %d files, %d rows; want %d, %d", sum.Files, sum.Rows, files, files*rows)
	}
	checkTable(t, dir, fixture.IDs(0, files*rows), fixture.Expected)
}

// Connections to the store cut again and again in the middle of responses: the load reads every
// object whole (fetching on after each cut, conditional on the ETag) and loads every row once.
func TestConnectionsToTheStoreCut(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const files, rows = 2, 4000
	srv, _ := parquetBucket(t, files, rows)
	p, err := tcpproxy.New(strings.TrimPrefix(srv.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://"+p.Addr())
	// Each cut ends every connection, a request still waiting for its response too, which the SDK
	// then sends again: 12 cuts in a row can meet one request more than the default 5 times.
	st := objstore.New(objstore.WithMaxAttempts(20), objstore.WithMaxBackoff(5*time.Millisecond), objstore.WithRangeBytes(64<<10))
	defer st.Close()

	// A cut every 96 KiB of responses, at most 12 of them. The proxy forwards up to 32 KiB at a time
	// and drops the chunk a cut falls in: a cut due sooner could drop a response's first chunk whole,
	// before the body starts, and then only the SDK would send the request again.
	done := make(chan struct{})
	cutter := make(chan struct{})
	go func() {
		defer close(cutter)
		for range 12 {
			n := p.Cuts()
			p.CutBackAfter(96 << 10)
			for p.Cuts() == n {
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}
	}()
	cfg, dir := bucketConfig(t, mem, st, fixture.TableColumns, "s3://data/a/")
	sum := run(t, cfg)
	close(done)
	<-cutter
	if sum.Files != files || sum.Rows != files*rows {
		t.Errorf("loaded %d files, %d rows; want %d, %d", sum.Files, sum.Rows, files, files*rows)
	}
	if p.Cuts() == 0 || sum.ObjectRetries == 0 {
		t.Errorf("%d cuts, %d GETs fetched on; want both above 0 (the test cut no response body)", p.Cuts(), sum.ObjectRetries)
	}
	t.Logf("%d cuts, %d requests, %d fetched on, %d object bytes", p.Cuts(), sum.ObjectRequests, sum.ObjectRetries, sum.ObjectBytes)
	checkTable(t, dir, fixture.IDs(0, files*rows), fixture.Expected)
}

// A plan opens the files ahead of the one it reports on, several at once (each costs a GET in a
// bucket), and still reports them in order, every one, with what a plan of one file at a time finds.
func TestPlanOpensObjectsAhead(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const files, rows = 40, 20
	srv, _ := parquetBucket(t, files, rows)
	watch := srv.Watch(t, 5*time.Millisecond)
	st := objstore.New()
	defer st.Close()

	cfg, _ := bucketConfig(t, mem, st, fixture.TableColumns, "s3://data/a/")
	rep, err := load.Plan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range rep.Files {
		paths = append(paths, f.Path)
		if f.Rows != rows || f.Schema != 0 || f.Error != "" {
			t.Errorf("%s: %+v; want %d rows of schema 0", f.Path, f, rows)
		}
	}
	if len(paths) != files || !slices.IsSorted(paths) || rep.Rows != files*rows {
		t.Errorf("plan of %d files, %d rows, in order %v; want %d files, %d rows, in lexical order", len(paths), rep.Rows, slices.IsSorted(paths), files, files*rows)
	}
	if _, reads := watch.MaxConcurrent(); reads < 2 || reads > 17 {
		t.Errorf("at most %d objects read at once; want several (2 to 17: up to 16 opened ahead and the one in use)", reads)
	}
}

// A load opens the objects ahead of the one it schedules, several at once, whatever the number of
// decoders: a load of many small objects does not wait a round trip per object. Every row arrives
// once.
func TestLoadOpensObjectsAhead(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const files, rows = 40, 25
	srv := s3test.Start(t)
	srv.CreateBucket(t, "data")
	local := t.TempDir()
	for i := range files {
		p := filepath.Join(local, fmt.Sprintf("day=%02d.csv", i))
		if err := fixture.WriteCSV(p, int64(i*rows), rows); err != nil {
			t.Fatal(err)
		}
	}
	srv.PutDir(t, "data", "c/", local)
	watch := srv.Watch(t, 5*time.Millisecond)
	st := objstore.New()
	defer st.Close()

	cfg, dir := bucketConfig(t, mem, st, fixture.CSVColumns, "s3://data/c/")
	cfg.Decoders = 2
	sum := run(t, cfg)
	if sum.Files != files || sum.Rows != files*rows {
		t.Errorf("loaded %d files, %d rows; want %d, %d", sum.Files, sum.Rows, files, files*rows)
	}
	checkTable(t, dir, fixture.IDs(0, files*rows), fixture.CSVExpected)
	if _, reads := watch.MaxConcurrent(); reads < 3 {
		t.Errorf("at most %d objects read at once with 2 decoders; want more (opened ahead)", reads)
	}
}

// Objects whose names do not say their format, or say the wrong one, load as the same local files
// do: a Parquet file with no extension (Hive, Trino, Flink), an Arrow IPC stream named .arrow
// (Hugging Face datasets) and Parquet named .csv, beside a text object that is skipped. The plan
// names the format each was read in, and every row arrives once.
func TestObjectsLoadByTheirBytes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "data")
	local := t.TempDir()
	const rows = 300
	for i, w := range []func(string) error{
		func(p string) error { return fixture.WriteParquet(p, 0, rows, 100) },
		func(p string) error { return fixture.WriteIPC(p, rows, rows, 100, true) },
		func(p string) error { return fixture.WriteParquet(p, 2*rows, rows, 100) },
	} {
		name := []string{"000000_0", "train.arrow", "misnamed.csv"}[i]
		if err := w(filepath.Join(local, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(local, "NOTES"), []byte("written by the nightly job\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.PutDir(t, "data", "h/", local)
	st := objstore.New()
	defer st.Close()

	cfg, dir := bucketConfig(t, mem, st, fixture.TableColumns, "s3://data/h/")
	rep, err := load.Plan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Files {
		got = append(got, path.Base(f.Path)+" "+f.Format)
		if f.Error != "" {
			t.Errorf("plan: %s: %s", f.Path, f.Error)
		}
	}
	if want := "000000_0 parquet, misnamed.csv parquet, train.arrow arrow-stream"; strings.Join(got, ", ") != want {
		t.Errorf("plan: %s; want %s", strings.Join(got, ", "), want)
	}
	sum := run(t, cfg)
	if sum.Files != 3 || sum.Rows != 3*rows {
		t.Errorf("loaded %d files, %d rows; want 3, %d", sum.Files, sum.Rows, 3*rows)
	}
	checkTable(t, dir, fixture.IDs(0, 3*rows), fixture.Expected)
}
