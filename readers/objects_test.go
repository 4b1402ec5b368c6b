package readers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/readers"
)

func objectStore(t *testing.T) (*s3test.Server, *objstore.Store) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "data")
	st := objstore.New()
	t.Cleanup(func() { _ = st.Close() })
	return srv, st
}

// putObject puts the local file at key in bucket "data" and returns the object's File, as Discover
// finds it.
func putObject(t *testing.T, srv *s3test.Server, st *objstore.Store, key, local string) readers.File {
	t.Helper()
	srv.PutFile(t, "data", key, local)
	files, err := readers.Discover(context.Background(), []string{"s3://data/" + key}, readers.WithObjectStore(st))
	if err != nil {
		t.Fatal(err)
	}
	return files[0]
}

func paths(files []readers.File) string {
	var s []string
	for _, f := range files {
		p := f.Path
		for _, part := range f.Partitions {
			p += " " + part.Key + "=" + part.Value
		}
		s = append(s, p)
	}
	return strings.Join(s, "\n")
}

func TestDiscoverObjects(t *testing.T) {
	srv, st := objectStore(t)
	pq := filepath.Join(t.TempDir(), "x.parquet")
	if err := fixture.WriteParquet(pq, 0, 10, 10); err != nil {
		t.Fatal(err)
	}
	pqBytes, _ := os.ReadFile(pq)
	for _, k := range []string{"t/b.parquet", "t/a.csv", "t/year=2024/month=01/c.parquet", "t/year=2023/d.parquet",
		"t/_SUCCESS", "t/.hidden.parquet", "t/_delta_log/0.parquet", "t/.spark/e.parquet", "t/a.csv.crc", "t/noext"} {
		srv.Put(t, "data", k, pqBytes)
	}
	srv.Put(t, "data", "t/readme.md", []byte("# not data\n"))
	// Many objects named with no format (as Hive, Trino and Flink name Parquet files), some of them
	// not data, among named ones: more than formatQueue checks at once, passed on in key order.
	var many []string
	for i := range 60 {
		k := fmt.Sprintf("many/%03d", i)
		switch i % 5 {
		case 0:
			k += ".parquet"
		case 3:
			srv.Put(t, "data", k, []byte("plain text, no magic"))
			continue
		}
		srv.Put(t, "data", k, pqBytes)
		many = append(many, "s3://data/"+k)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		sources []string
		opts    []readers.DiscoverOption
		want    string
	}{
		{"prefix", []string{"s3://data/t/"}, nil,
			"s3://data/t/a.csv\ns3://data/t/b.parquet\ns3://data/t/noext\ns3://data/t/year=2023/d.parquet year=2023\ns3://data/t/year=2024/month=01/c.parquet year=2024 month=01"},
		{"prefix without slash", []string{"s3://data/t"}, []readers.DiscoverOption{readers.WithExclude("*.csv", "year=2023/**")},
			"s3://data/t/b.parquet\ns3://data/t/noext\ns3://data/t/year=2024/month=01/c.parquet year=2024 month=01"},
		{"many named with no format", []string{"s3://data/many/"}, nil, strings.Join(many, "\n")},
		{"glob", []string{"s3://data/t/**/*.parquet"}, nil,
			"s3://data/t/b.parquet\ns3://data/t/year=2023/d.parquet year=2023\ns3://data/t/year=2024/month=01/c.parquet year=2024 month=01"},
		{"include", []string{"s3://data/t/"}, []readers.DiscoverOption{readers.WithInclude("year=*/*.parquet")},
			"s3://data/t/year=2023/d.parquet year=2023"},
		{"one object, no extension: sniffed", []string{"s3://data/t/noext"}, nil, "s3://data/t/noext"},
		{"duplicates across sources", []string{"s3://data/t/b.parquet", "s3://data/t/*.parquet"}, nil, "s3://data/t/b.parquet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files, err := readers.Discover(ctx, c.sources, append(c.opts, readers.WithObjectStore(st))...)
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(files); got != c.want {
				t.Errorf("Discover = \n%s\nwant\n%s", got, c.want)
			}
			for _, f := range files {
				if f.ETag == "" || f.Size != int64(len(pqBytes)) || f.Store != st || f.Format == readers.FormatUnknown {
					t.Errorf("file %+v: want its ETag, size, store and format", f)
				}
			}
		})
	}
	// The objects named with no format have their first bytes read several at once, at most 16.
	watch := srv.Watch(t, 5*time.Millisecond)
	wst := objstore.New()
	defer wst.Close()
	if files, err := readers.Discover(ctx, []string{"s3://data/many/"}, readers.WithObjectStore(wst)); err != nil || paths(files) != strings.Join(many, "\n") {
		t.Errorf("through a proxy: %v, %s", err, paths(files))
	}
	if _, reads := watch.MaxConcurrent(); reads < 2 || reads > 16 {
		t.Errorf("at most %d objects' first bytes read at once; want 2 to 16", reads)
	}
	if _, err := readers.Discover(ctx, []string{"s3://data/nothing/"}, readers.WithObjectStore(st)); !errors.Is(err, readers.ErrNoFiles) {
		t.Errorf("an empty prefix: %v; want ErrNoFiles", err)
	}
	if _, err := readers.Discover(ctx, []string{"s3://data/t/"}); err == nil || !strings.Contains(err.Error(), "no object store") {
		t.Errorf("without a store: %v", err)
	}
	// DiscoverFunc streams, and stops at fn's error, returned as it is.
	stop := errors.New("stop")
	n := 0
	err := readers.DiscoverFunc(ctx, []string{"s3://data/t/"}, func(readers.File) error {
		n++
		return stop
	}, readers.WithObjectStore(st))
	if err != stop || n != 1 { //nolint:errorlint // fn's error comes back as it is
		t.Errorf("DiscoverFunc stopping at the first file: %v after %d files", err, n)
	}
}

// TestObjectReadsLikeLocal reads Parquet and Arrow IPC file objects by ranged GETs and checks the
// values match the local file's, with one request for the footer and at most one per unit (a
// Parquet row group, a run of IPC batches), each byte read about once.
func TestObjectReadsLikeLocal(t *testing.T) {
	srv, st := objectStore(t)
	// More than 1 MiB, so the units are fetched by ranged GETs (a stream's one unit by one streaming
	// GET); 1 MiB or less, so Open reads the object whole and its units cost no request.
	for _, c := range []struct {
		name  string
		write func(string) error
		whole bool
	}{
		{"f.parquet", func(p string) error { return fixture.WriteParquet(p, 0, 20000, 4000) }, false},
		{"f.arrow", func(p string) error { return fixture.WriteIPC(p, 0, 20000, 4000, false) }, false},
		{"small.parquet", func(p string) error { return fixture.WriteParquet(p, 0, 5000, 1000) }, true},
		{"small.arrow", func(p string) error { return fixture.WriteIPC(p, 0, 5000, 1000, false) }, true},
		{"f.arrows", func(p string) error { return fixture.WriteIPC(p, 0, 20000, 4000, true) }, false},
		{"small.arrows", func(p string) error { return fixture.WriteIPC(p, 0, 5000, 1000, true) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			local := filepath.Join(t.TempDir(), c.name)
			if err := c.write(local); err != nil {
				t.Fatal(err)
			}
			obj := putObject(t, srv, st, c.name, local)
			ctx := context.Background()
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)

			req0, bytes0 := st.Stats()
			budget := &countingBudget{}
			src, err := readers.Open(ctx, obj, readers.WithAllocator(mem), readers.WithPrefetchBudget(budget, 0, readers.AheadLimits{}), readers.WithBatchBytes(64<<10))
			if err != nil {
				t.Fatal(err)
			}
			reqOpen, _ := st.Stats()
			got := collect(t, src, 0)
			defer got.Release()
			src.Close()
			req, byt := st.Stats()
			units := int64(len(src.Units()))
			if small := obj.Size <= 1<<20; small != c.whole {
				t.Fatalf("%s is %d bytes: the test wants it %s 1 MiB", c.name, obj.Size, map[bool]string{true: "at most", false: "more than"}[c.whole])
			}
			stream := strings.HasSuffix(c.name, ".arrows")
			switch {
			case c.whole:
				if req-req0 != 1 {
					t.Errorf("%d requests for an object of %d bytes in %d units; want 1 (read whole with the footer)", req-req0, obj.Size, units)
				}
			case stream:
				// a schema and 5 batches: Open reads each message's length and metadata, and the
				// end-of-stream marker, with one GET each; the schema is in the first one
				if reqOpen-req0 > 6 {
					t.Errorf("%d requests to open a stream of 6 messages; want at most 6", reqOpen-req0)
				}
				if req-reqOpen != 1 { // the unit is one streaming GET
					t.Errorf("%d requests to read a stream Open had checked; want 1", req-reqOpen)
				}
			case units < 2 || req-req0 > 1+units || req-req0 < 2:
				t.Errorf("%d requests for a footer and %d units; want at most one each (a unit within the footer's read needs none)", req-req0, units)
			}
			if amp := float64(byt-bytes0) / float64(obj.Size); amp > 1.1 && !stream {
				t.Errorf("read %d bytes of a %d-byte object (%.2fx)", byt-bytes0, obj.Size, amp)
			}
			if (budget.max <= 0 && !stream) || budget.held != 0 {
				t.Errorf("prefetch budget: most held %d, held at the end %d; want some, then none", budget.max, budget.held)
			}
			lsrc, err := readers.Open(ctx, readers.File{Path: local}, readers.WithAllocator(mem), readers.WithBatchBytes(64<<10))
			if err != nil {
				t.Fatal(err)
			}
			want := collect(t, lsrc, 0)
			defer want.Release()
			lsrc.Close()
			if !array.RecordEqual(got, want) {
				t.Error("the object's rows differ from the local file's")
			}
		})
	}
}

// countingBudget is a PrefetchBudget that never makes anyone wait and counts what it lends.
type countingBudget struct {
	mu          sync.Mutex
	held, max   int64
	tries, lent int // TryAcquire calls, and those that took bytes
}

func (b *countingBudget) Acquire(_ context.Context, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held += n
	b.max = max(b.max, b.held)
	return nil
}

func (b *countingBudget) TryAcquire(n, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tries++
	if b.held+n > limit {
		return false
	}
	b.lent++
	b.held += n
	b.max = max(b.max, b.held)
	return true
}

func (b *countingBudget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
}

func (b *countingBudget) counts() (held, max int64, tries, lent int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.max, b.tries, b.lent
}

// TestObjectIPCRequests pins the GETs of an Arrow IPC file object read through its units, on the
// real server: one suffix-range GET for the footer, then exactly one GET per unit however many
// record batches it holds, each unit fetched ahead of its ReadUnit (ReadAhead) and none fetched
// twice or in vain; units left out of ReadAhead are never fetched; what is fetched ahead and not
// read is released at Close; a cancelled ReadUnit waiting for its fetch returns at once.
func TestObjectIPCRequests(t *testing.T) {
	srv, st := objectStore(t)
	local := filepath.Join(t.TempDir(), "f.arrow")
	const batches, batchRows = 8, 2000
	if err := fixture.WriteIPC(local, 0, batches*batchRows, batchRows, false); err != nil {
		t.Fatal(err)
	}
	f := putObject(t, srv, st, "f.arrow", local)
	ctx := context.Background()
	per := f.Size / batches // batchBytes of a unit per record batch
	if per < 2*64<<10 {
		t.Fatalf("record batches of %d bytes: the test wants each larger than twice the footer's 64 KiB read", per)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	lsrc, err := readers.Open(ctx, readers.File{Path: local}, readers.WithAllocator(mem), readers.WithBatchBytes(per))
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, lsrc, 0)
	defer want.Release()
	lsrc.Close()

	// open returns the object's source, units of batchBytes, and the requests and bytes its Open took.
	open := func(t *testing.T, budget *countingBudget, batchBytes int64, depth int) (readers.Source, int64) {
		t.Helper()
		req0, _ := st.Stats()
		src, err := readers.Open(ctx, f, readers.WithAllocator(mem), readers.WithBatchBytes(batchBytes),
			readers.WithPrefetchBudget(budget, 0, readers.AheadLimits{Units: depth, Bytes: 1 << 40}))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := st.Stats()
		if req-req0 != 1 {
			t.Errorf("Open made %d requests; want 1 (the footer, in one suffix-range GET)", req-req0)
		}
		return src, req
	}
	readUnits := func(t *testing.T, src readers.Source, units []int) arrow.RecordBatch {
		t.Helper()
		var recs []arrow.RecordBatch
		for _, u := range units {
			err := src.ReadUnit(ctx, u, func(rec arrow.RecordBatch) error {
				rec.Retain()
				recs = append(recs, rec)
				return nil
			})
			if err != nil {
				t.Fatalf("ReadUnit(%d) = %v", u, err)
			}
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		return concatRecords(t, src.Schema(), recs)
	}
	for _, c := range []struct {
		name       string
		batchBytes int64
		units      int   // the file's units
		read       []int // the units read, all of them named in ReadAhead
		depth      int   // units fetched ahead at once
	}{
		{"a batch a unit", per, batches, []int{0, 1, 2, 3, 4, 5, 6, 7}, 3},
		{"four batches a unit", f.Size / 2, 2, []int{0, 1}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			budget := &countingBudget{}
			src, req0 := open(t, budget, c.batchBytes, c.depth)
			if len(src.Units()) != c.units {
				t.Fatalf("%d units; want %d", len(src.Units()), c.units)
			}
			src.(readers.ReadAheader).ReadAhead(c.read)
			got := readUnits(t, src, c.read)
			defer got.Release()
			if err := src.Close(); err != nil {
				t.Fatal(err)
			}
			req, _ := st.Stats()
			if req-req0 != int64(c.units) {
				t.Errorf("%d GETs for %d units of %d record batches; want one per unit", req-req0, c.units, batches)
			}
			if !array.RecordEqual(got, want) {
				t.Error("the object's rows differ from the local file's")
			}
			held, most, _, lent := budget.counts()
			if held != 0 || most <= 0 || lent == 0 {
				t.Errorf("budget: %d held at the end, %d at most, %d units fetched ahead; want 0, some, some", held, most, lent)
			}
		})
	}
	t.Run("units left out", func(t *testing.T) {
		budget := &countingBudget{}
		src, req0 := open(t, budget, per, 2)
		_, bytes0 := st.Stats()
		read := []int{1, 4, 6}
		src.(readers.ReadAheader).ReadAhead(read)
		got := readUnits(t, src, read)
		got.Release()
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		req, byt := st.Stats()
		var unitBytes int64
		for _, u := range read {
			unitBytes += src.Units()[u].Bytes
		}
		if req-req0 != int64(len(read)) || float64(byt-bytes0) > 1.05*float64(unitBytes) {
			t.Errorf("reading units %v of %d: %d GETs of %d bytes; want %d GETs of about %d bytes", read, batches, req-req0, byt-bytes0, len(read), unitBytes)
		}
		if held, _, _, lent := budget.counts(); held != 0 || lent == 0 {
			t.Errorf("budget: %d held at the end, %d units fetched ahead; want 0 and some", held, lent)
		}
	})
	t.Run("closed with units fetched ahead", func(t *testing.T) {
		budget := &countingBudget{}
		src, _ := open(t, budget, per, 1)
		src.(readers.ReadAheader).ReadAhead([]int{0, 1, 2})
		readUnits(t, src, []int{0}).Release()
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		if held, _, _, lent := budget.counts(); held != 0 || lent < 2 {
			t.Errorf("budget: %d held after Close, %d units fetched ahead; want 0 and at least 2", held, lent)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		budget := &countingBudget{}
		src, _ := open(t, budget, per, 1)
		src.(readers.ReadAheader).ReadAhead([]int{0, 1})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := src.ReadUnit(cctx, 0, func(arrow.RecordBatch) error { return nil }); !errors.Is(err, context.Canceled) {
			t.Errorf("ReadUnit with a cancelled context = %v; want context.Canceled", err)
		}
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		if held, _, _, _ := budget.counts(); held != 0 {
			t.Errorf("budget: %d held after Close; want 0", held)
		}
	})
	t.Run("budget lends nothing", func(t *testing.T) {
		budget := &countingBudget{}
		req0, _ := st.Stats()
		src, err := readers.Open(ctx, f, readers.WithAllocator(mem), readers.WithBatchBytes(per), readers.WithPrefetchBudget(budget, 0, readers.AheadLimits{Units: 2, Bytes: 1}))
		if err != nil {
			t.Fatal(err)
		}
		src.(readers.ReadAheader).ReadAhead([]int{0, 1, 2, 3, 4, 5, 6, 7})
		got := readUnits(t, src, []int{0, 1, 2, 3, 4, 5, 6, 7})
		defer got.Release()
		src.Close()
		req, _ := st.Stats()
		held, most, tries, lent := budget.counts()
		if lent != 0 || tries == 0 || held != 0 || most <= 0 || req-req0 != 1+batches || !array.RecordEqual(got, want) {
			t.Errorf("a budget that lends nothing ahead: %d of %d tries lent, %d held, %d most, %d requests; want 0 lent, each unit fetched by its ReadUnit once, the same rows",
				lent, tries, held, most, req-req0)
		}
	})
}

func TestObjectChangedOrGoneAfterListing(t *testing.T) {
	srv, st := objectStore(t)
	dir := t.TempDir()
	for i, name := range []string{"a.parquet", "b.csv"} {
		p := filepath.Join(dir, name)
		var err error
		if i == 0 {
			err = fixture.WriteParquet(p, 0, 100, 50)
		} else {
			err = fixture.WriteCSV(p, 0, 100)
		}
		if err != nil {
			t.Fatal(err)
		}
		srv.PutFile(t, "data", name, p)
	}
	ctx := context.Background()
	files, err := readers.Discover(ctx, []string{"s3://data/"}, readers.WithObjectStore(st))
	if err != nil || len(files) != 2 {
		t.Fatalf("Discover: %v, %d files", err, len(files))
	}
	for _, f := range files {
		key := strings.TrimPrefix(f.Path, "s3://data/")
		srv.Put(t, "data", key, []byte("rewritten"))
		err := openAndRead(ctx, f)
		var fe *readers.FileError
		if !errors.Is(err, objstore.ErrChanged) || !errors.As(err, &fe) || fe.Path != f.Path {
			t.Errorf("%s rewritten after listing: %v; want ErrChanged in a FileError naming it", f.Path, err)
		}
		srv.Delete(t, "data", key)
		err = openAndRead(ctx, f)
		if !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), f.Path) || !strings.Contains(err.Error(), "NoSuchKey") {
			t.Errorf("%s deleted after listing: %v; want ErrNotFound naming it and NoSuchKey", f.Path, err)
		}
	}
}

// openAndRead opens f and reads its first unit.
func openAndRead(ctx context.Context, f readers.File) error {
	src, err := readers.Open(ctx, f)
	if err != nil {
		return err
	}
	defer src.Close()
	return src.ReadUnit(ctx, 0, func(arrow.RecordBatch) error { return nil })
}

// A small CSV object (1 MiB or less) costs one GET: Open reads it whole and its unit reads it
// again from memory. A larger one is sampled by Open and streamed by its unit, as before. Both read
// the rows a local file of the same bytes gives.
func TestSmallCSVObjectOneGET(t *testing.T) {
	srv, st := objectStore(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		rows int64
		gets func(int64) bool
		want string
	}{
		{"small.csv", 500, func(n int64) bool { return n == 1 }, "1"},
		{"large.csv", 20000, func(n int64) bool { return n >= 2 }, "2 or more"},
	} {
		local := filepath.Join(t.TempDir(), c.name)
		if err := fixture.WriteCSV(local, 0, c.rows); err != nil {
			t.Fatal(err)
		}
		obj := putObject(t, srv, st, "csv/"+c.name, local)
		if small := obj.Size <= 1<<20; small != (c.name == "small.csv") {
			t.Fatalf("%s is %d bytes: the test wants small.csv at most 1 MiB and large.csv more", c.name, obj.Size)
		}
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		lsrc, err := readers.Open(ctx, readers.File{Path: local}, readers.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		want := collect(t, lsrc, 0)
		lsrc.Close()

		req0, _ := st.Stats()
		src, err := readers.Open(ctx, obj, readers.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, src, 0)
		src.Close()
		if req, _ := st.Stats(); !c.gets(req - req0) {
			t.Errorf("%s (%d bytes): opening and reading it took %d requests; want %s", c.name, obj.Size, req-req0, c.want)
		}
		if !array.RecordEqual(got, want) {
			t.Errorf("%s: the rows read from the bucket differ from the local file's", c.name)
		}
		got.Release()
		want.Release()
		mem.AssertSize(t, 0)
	}
}

// TestWideStreamObject opens an Arrow IPC stream object whose schema (1,500 columns) is larger than
// the first read of Open's check, so the schema is read partly from the bytes that read kept and
// partly by a request of its own; its values must come back as written.
func TestWideStreamObject(t *testing.T) {
	srv, st := objectStore(t)
	const cols, rows, batches = 1500, 60, 3
	fields := make([]arrow.Field, cols)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("column_with_a_long_name_%04d", i), Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	}
	schema := arrow.NewSchema(fields, nil)
	local := filepath.Join(t.TempDir(), "wide.arrows")
	out, err := os.Create(local)
	if err != nil {
		t.Fatal(err)
	}
	w := ipc.NewWriter(out, ipc.WithSchema(schema))
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for k := range batches {
		for c := range cols {
			for r := range rows {
				b.Field(c).(*array.Int64Builder).Append(int64(k*rows*cols + r*cols + c))
			}
		}
		rec := b.NewRecordBatch()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	b.Release()
	if err := errors.Join(w.Close(), out.Close()); err != nil {
		t.Fatal(err)
	}
	obj := putObject(t, srv, st, "wide.arrows", local)
	ctx := context.Background()
	if obj.Size <= 1<<20 {
		t.Fatalf("the stream is %d bytes: the test wants more than 1 MiB, so Open does not read it whole", obj.Size)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src, err := readers.Open(ctx, obj, readers.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if !src.Schema().Equal(schema) {
		t.Fatalf("schema of %d fields; want the %d written", src.Schema().NumFields(), cols)
	}
	got := collect(t, src, 0)
	defer got.Release()
	if got.NumRows() != rows*batches {
		t.Fatalf("%d rows; want %d", got.NumRows(), rows*batches)
	}
	for _, c := range []int{0, 777, cols - 1} {
		col := got.Column(c).(*array.Int64)
		for r := range int(got.NumRows()) {
			k, rr := r/rows, r%rows
			if want := int64(k*rows*cols + rr*cols + c); col.Value(r) != want {
				t.Fatalf("column %d row %d = %d; want %d", c, r, col.Value(r), want)
			}
		}
	}
}

// TestObjectFormatByMagic lists objects whose names say Arrow IPC file (.arrow, .feather), CSV,
// Parquet or nothing, and reads each as a local file of the same bytes reads: a stream named .arrow
// (as Hugging Face datasets writes them) as a stream, an IPC file as a file (also when named
// .parquet or .csv), Parquet named .csv or nothing as Parquet. Telling which costs no request beyond Open's own first one, except for a
// large IPC object that does not end with a file's magic (one GET of its first bytes), and a large
// misnamed CSV (Parquet's footer, after the CSV's first block).
func TestObjectFormatByMagic(t *testing.T) {
	srv, st := objectStore(t)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		write  func(string) error
		format readers.Format
		open   int64 // requests Open makes, at most
	}{
		{"small-stream.arrow", func(p string) error { return fixture.WriteIPC(p, 0, 5000, 1000, true) }, readers.FormatIPCStream, 1},
		{"small-file.feather", func(p string) error { return fixture.WriteIPC(p, 0, 5000, 1000, false) }, readers.FormatIPCFile, 1},
		// the end (no file's magic there), the first 8 bytes, and a check of the messages: one read
		// for the schema and the first batch, one for each other batch (the end-of-stream marker is
		// in the end already read)
		{"large-stream.arrow", func(p string) error { return fixture.WriteIPC(p, 0, 20000, 4000, true) }, readers.FormatIPCStream, 7},
		{"large-file.arrow", func(p string) error { return fixture.WriteIPC(p, 0, 20000, 4000, false) }, readers.FormatIPCFile, 1},
		{"small-parquet", func(p string) error { return fixture.WriteParquet(p, 0, 5000, 1000) }, readers.FormatParquet, 1},
		{"large-parquet", func(p string) error { return fixture.WriteParquet(p, 0, 20000, 4000) }, readers.FormatParquet, 1},
		{"small-parquet.csv", func(p string) error { return fixture.WriteParquet(p, 0, 5000, 1000) }, readers.FormatParquet, 1},
		{"large-parquet.csv", func(p string) error { return fixture.WriteParquet(p, 0, 20000, 4000) }, readers.FormatParquet, 2},
		{"small-file.csv", func(p string) error { return fixture.WriteIPC(p, 0, 5000, 1000, false) }, readers.FormatIPCFile, 1},
		{"small-file.parquet", func(p string) error { return fixture.WriteIPC(p, 0, 5000, 1000, false) }, readers.FormatIPCFile, 1},
		{"large-file.parquet", func(p string) error { return fixture.WriteIPC(p, 0, 20000, 4000, false) }, readers.FormatIPCFile, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			local := filepath.Join(t.TempDir(), c.name)
			if err := c.write(local); err != nil {
				t.Fatal(err)
			}
			srv.PutFile(t, "data", "ipc/"+c.name, local)
			// found below a prefix, the listing gives the name's format; a nameless object, found
			// alone, is given with no format, as a caller that built its File by hand would
			at := "s3://data/ipc/"
			nameless := !strings.Contains(c.name, ".")
			if nameless {
				at += c.name
			}
			files, err := readers.Discover(ctx, []string{at}, readers.WithObjectStore(st), readers.WithInclude(c.name))
			if err != nil || len(files) != 1 {
				t.Fatalf("listed %d files: %v", len(files), err)
			}
			f := files[0]
			if nameless {
				f.Format = readers.FormatUnknown
			}
			if small := f.Size <= 1<<20; small != strings.HasPrefix(c.name, "small") {
				t.Fatalf("%s is %d bytes: the test wants small ones at most 1 MiB, large ones more", c.name, f.Size)
			}
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			lsrc, err := readers.Open(ctx, readers.File{Path: local}, readers.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			want := collect(t, lsrc, 0)
			defer want.Release()
			lsrc.Close()

			req0, _ := st.Stats()
			src, err := readers.Open(ctx, f, readers.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			if req, _ := st.Stats(); req-req0 > c.open {
				t.Errorf("Open made %d requests; want at most %d", req-req0, c.open)
			}
			if got := src.File().Format; got != c.format {
				t.Errorf("read as %v; want %v", got, c.format)
			}
			got := collect(t, src, 0)
			defer got.Release()
			src.Close()
			if !array.RecordEqual(got, want) {
				t.Errorf("the rows read from the bucket differ from the local file's")
			}
		})
	}
}

// Discovery stopped by its caller while the first bytes of nameless objects are being read returns
// only once those reads have ended: no goroutine outlives it.
func TestDiscoverStopsItsFormatChecks(t *testing.T) {
	srv, _ := objectStore(t)
	pq := filepath.Join(t.TempDir(), "x.parquet")
	if err := fixture.WriteParquet(pq, 0, 10, 10); err != nil {
		t.Fatal(err)
	}
	pqBytes, _ := os.ReadFile(pq)
	for i := range 40 {
		srv.Put(t, "data", fmt.Sprintf("stop/%03d", i), pqBytes)
	}
	srv.Watch(t, 5*time.Millisecond) // so that checks are in flight when the caller stops
	st := objstore.New()
	ignore := goleak.IgnoreCurrent()
	stop := errors.New("stop")
	n := 0
	err := readers.DiscoverFunc(context.Background(), []string{"s3://data/stop/"}, func(readers.File) error {
		n++
		return stop
	}, readers.WithObjectStore(st))
	if err != stop || n != 1 { //nolint:errorlint // fn's error comes back as it is
		t.Fatalf("DiscoverFunc stopping at the first file: %v after %d files", err, n)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}
