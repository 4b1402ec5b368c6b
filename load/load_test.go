package load_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/loaderproject/loader/embedded"
	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var table = tableschema.TableName{Catalog: "main", Schema: "default", Table: "events"}

// newWarehouse makes a warehouse in a temp dir holding the table with the given columns.
func newWarehouse(t *testing.T, columns string) (string, *warehouse.Warehouse) {
	t.Helper()
	dir := t.TempDir()
	wh, err := warehouse.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := tableschema.ParseColumns(columns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wh.CreateTable(context.Background(), table, schema); err != nil {
		t.Fatal(err)
	}
	return dir, wh
}

// scan reads the table back from disk in canonical form.
func scan(t *testing.T, dir string) []fixture.Row {
	t.Helper()
	wh, err := warehouse.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := wh.Table(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	err = tbl.Scan(context.Background(), func(rec arrow.RecordBatch) error {
		rec.Retain()
		recs = append(recs, rec)
		return nil
	})
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	return fixture.Rows(recs)
}

func checkTable(t *testing.T, dir string, ids []int64, want func(int64) fixture.Row) {
	t.Helper()
	if diffs := fixture.Diff(scan(t, dir), ids, want, 10); len(diffs) > 0 {
		t.Fatalf("table contents differ from the source:\n%s", join(diffs))
	}
}

func join(s []string) string {
	out := ""
	for _, x := range s {
		out += "  " + x + "\n"
	}
	return out
}

// startSink serves the warehouse in-process on a loopback port, as `loader serve` does.
func startSink(t *testing.T, wh *warehouse.Warehouse, opts ...sink.Option) (*sink.Server, string) {
	t.Helper()
	srv := sink.New(wh, append([]sink.Option{sink.WithCommitInterval(20 * time.Millisecond)}, opts...)...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	<-srv.Ready()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, "grpc://" + lis.Addr().String()
}

// embeddedAt is the embedded sink over dir, committing often.
func embeddedAt(dir string) load.Target {
	return embedded.New(dir, embedded.WithCommitInterval(20*time.Millisecond))
}

func baseConfig(t *testing.T, mem memory.Allocator, sources ...string) load.Config {
	return load.Config{
		Sources:       sources,
		Table:         table,
		Streams:       3,
		Connections:   2,
		MaxFrameBytes: 64 << 10, // many frames from a small input
		ManifestDir:   t.TempDir(),
		Allocator:     mem,
	}
}

func run(t *testing.T, cfg load.Config) *load.Summary {
	t.Helper()
	sum, err := load.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sum
}

func TestLoadEveryFormatIntoEmbeddedSink(t *testing.T) {
	const rows = 3000
	tests := []struct {
		name    string
		columns string
		write   func(path string) error
		ext     string
		want    func(int64) fixture.Row
	}{
		{"parquet", fixture.TableColumns, func(p string) error { return fixture.WriteParquet(p, 0, rows, 700) }, ".parquet", fixture.Expected},
		{"arrow file", fixture.TableColumns, func(p string) error { return fixture.WriteIPC(p, 0, rows, 500, false) }, ".arrow", fixture.Expected},
		{"arrow stream", fixture.TableColumns, func(p string) error { return fixture.WriteIPC(p, 0, rows, 500, true) }, ".arrows", fixture.Expected},
		{"csv", fixture.CSVColumns, func(p string) error { return fixture.WriteCSV(p, 0, rows) }, ".csv", fixture.CSVExpected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			dir, _ := newWarehouse(t, tt.columns)
			src := filepath.Join(t.TempDir(), "data"+tt.ext)
			if err := tt.write(src); err != nil {
				t.Fatal(err)
			}
			cfg := baseConfig(t, mem, src)
			cfg.Target = embeddedAt(dir)
			sum := run(t, cfg)
			if sum.Rows != rows || sum.VerifiedRows == nil || *sum.VerifiedRows != rows || sum.Files != 1 {
				t.Errorf("summary = %+v; want %d rows, verified", sum, rows)
			}
			checkTable(t, dir, fixture.IDs(0, rows), tt.want)
		})
	}
}

func TestLoadEveryDialectIntoRunningSink(t *testing.T) {
	for _, dialect := range []flightclient.Dialect{flightclient.Zerobus, flightclient.Flight, flightclient.FlightSQL} {
		t.Run(string(dialect), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			dir, wh := newWarehouse(t, fixture.TableColumns)
			_, endpoint := startSink(t, wh, sink.WithTokens("tok"))
			data := t.TempDir()
			for i := int64(0); i < 3; i++ {
				if err := fixture.WriteParquet(filepath.Join(data, "part-"+string(rune('a'+i))+".parquet"), i*1000, 1000, 300); err != nil {
					t.Fatal(err)
				}
			}
			cfg := baseConfig(t, mem, data)
			cfg.Endpoint, cfg.Protocol, cfg.Token = endpoint, dialect, "tok"
			sum := run(t, cfg)
			if sum.Rows != 3000 || sum.Files != 3 || sum.VerifiedRows == nil || *sum.VerifiedRows != 3000 {
				t.Errorf("summary = %+v; want 3000 rows from 3 files, verified", sum)
			}
			checkTable(t, dir, fixture.IDs(0, 3000), fixture.Expected)

			// The same command again loads nothing: every unit is in the manifest.
			again := run(t, cfg)
			if again.Rows != 0 || again.SkippedUnits == 0 {
				t.Errorf("re-run summary = %+v; want 0 rows and skipped units", again)
			}
			checkTable(t, dir, fixture.IDs(0, 3000), fixture.Expected)
		})
	}
}

func TestLoadWrongTokenFails(t *testing.T) {
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_ = dir
	_, endpoint := startSink(t, wh, sink.WithTokens("right"))
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, 10, 10); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, memory.DefaultAllocator, src)
	cfg.Endpoint, cfg.Token = endpoint, "wrong"
	if _, err := load.Run(context.Background(), cfg); err == nil {
		t.Fatal("Run with a wrong token succeeded")
	}
}

func TestTransientFaultsAreSurvived(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir, wh := newWarehouse(t, fixture.TableColumns)
	// Two streams are cut mid-load, and the next call after that is refused outright.
	srv, endpoint := startSink(t, wh, sink.WithFaults(sink.Faults{DropAfterFrames: 4, DropCalls: 2}))
	_ = srv
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, 4000, 1000); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, mem, src)
	cfg.Endpoint, cfg.Streams = endpoint, 2
	sum := run(t, cfg)
	if sum.Retries == 0 {
		t.Errorf("Retries = 0; want the dropped streams to be retried")
	}
	if sum.Rows != 4000 {
		t.Errorf("Rows = %d; want 4000", sum.Rows)
	}
	checkTable(t, dir, fixture.IDs(0, 4000), fixture.Expected)
}

func TestInterruptedLoadResumesExactlyOnce(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir, wh := newWarehouse(t, fixture.TableColumns)
	srv, endpoint := startSink(t, wh, sink.WithFaults(sink.Faults{AckDelay: 20 * time.Millisecond}))
	data := t.TempDir()
	for i := int64(0); i < 4; i++ {
		if err := fixture.WriteParquet(filepath.Join(data, "p"+string(rune('0'+i))+".parquet"), i*2000, 2000, 250); err != nil {
			t.Fatal(err)
		}
	}
	cfg := baseConfig(t, mem, data)
	cfg.Endpoint, cfg.Streams, cfg.MaxFrameBytes, cfg.MaxInflightBytes = endpoint, 2, 16<<10, 64<<10

	// First run: cancelled once some rows are acknowledged.
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Progress = &load.Progress{}
	go func() {
		for cfg.Progress.Rows.Load() < 1500 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	first, err := load.Run(ctx, cfg)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Run error = %v; want context.Canceled", err)
	}
	if first.Rows == 0 || first.Rows >= 8000 {
		t.Fatalf("interrupted run acknowledged %d rows; want some but not all", first.Rows)
	}

	// Second run finishes the rest: nothing is loaded twice, nothing is missing.
	srv.SetFaults(sink.Faults{})
	cfg.Progress = &load.Progress{}
	second := run(t, cfg)
	if first.Rows+second.Rows != 8000 {
		t.Errorf("runs acknowledged %d + %d rows; want 8000 in all", first.Rows, second.Rows)
	}
	checkTable(t, dir, fixture.IDs(0, 8000), fixture.Expected)
}

func TestLimitThenBackfill(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir, _ := newWarehouse(t, fixture.TableColumns)
	data := t.TempDir()
	for i := int64(0); i < 2; i++ {
		if err := fixture.WriteParquet(filepath.Join(data, "p"+string(rune('0'+i))+".parquet"), i*500, 500, 100); err != nil {
			t.Fatal(err)
		}
	}
	cfg := baseConfig(t, mem, data)
	cfg.Target = embeddedAt(dir)
	cfg.Limit = 37
	smoke := run(t, cfg)
	if smoke.Rows != 37 || smoke.VerifiedRows == nil || *smoke.VerifiedRows != 37 {
		t.Fatalf("--limit 37 summary = %+v; want 37 rows verified", smoke)
	}
	checkTable(t, dir, fixture.IDs(0, 37), fixture.Expected)
	cfg.Limit = 0
	rest := run(t, cfg)
	if rest.Rows != 963 {
		t.Errorf("backfill after --limit loaded %d rows; want 963", rest.Rows)
	}
	checkTable(t, dir, fixture.IDs(0, 1000), fixture.Expected)
}

func TestChangedFileLoadsAgainAndForceReloads(t *testing.T) {
	dir, _ := newWarehouse(t, fixture.TableColumns)
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, 100, 50); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, memory.DefaultAllocator, src)
	cfg.Target = embeddedAt(dir)
	run(t, cfg)
	// Rewritten with other rows: a new file as far as the manifest knows.
	if err := fixture.WriteParquet(src, 100, 120, 50); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(src, future, future); err != nil {
		t.Fatal(err)
	}
	if sum := run(t, cfg); sum.Rows != 120 {
		t.Errorf("changed file loaded %d rows; want 120", sum.Rows)
	}
	cfg.Force = true
	if sum := run(t, cfg); sum.Rows != 120 {
		t.Errorf("--force loaded %d rows; want 120", sum.Rows)
	}
	if got := len(scan(t, dir)); got != 340 {
		t.Errorf("table holds %d rows; want 100 + 120 + 120", got)
	}
}

func TestMemoryStaysWithinBudget(t *testing.T) {
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_ = dir
	_, endpoint := startSink(t, wh, sink.WithFaults(sink.Faults{AckDelay: 5 * time.Millisecond}))
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, 6000, 1500); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, memory.DefaultAllocator, src)
	cfg.Endpoint, cfg.MaxFrameBytes, cfg.MaxInflightBytes = endpoint, 8<<10, 48<<10
	cfg.Progress = &load.Progress{}
	run(t, cfg)
	if peak := cfg.Progress.InFlightPeak.Load(); peak > cfg.MaxInflightBytes || peak == 0 {
		t.Errorf("in-flight peak = %d bytes; want 0 < peak <= %d", peak, cfg.MaxInflightBytes)
	}
}

func TestMissingTableIsAClearError(t *testing.T) {
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, 10, 10); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, memory.DefaultAllocator, src)
	cfg.Target = embeddedAt(t.TempDir())
	_, err := load.Run(context.Background(), cfg)
	if !errors.Is(err, warehouse.ErrTableNotFound) {
		t.Fatalf("Run into a missing table = %v; want ErrTableNotFound", err)
	}
	cfg.CreateTable = true
	if sum := run(t, cfg); sum.Rows != 10 {
		t.Errorf("--create-table loaded %d rows; want 10", sum.Rows)
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, 10, 10); err != nil {
		t.Fatal(err)
	}
	dir, _ := newWarehouse(t, fixture.TableColumns)
	cfg := baseConfig(t, memory.DefaultAllocator, src)
	cfg.Target = embeddedAt(dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := load.Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("Run(cancelled) = %v; want context.Canceled", err)
	}
}
