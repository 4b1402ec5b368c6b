package load_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/bufpool"
	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/tcpproxy"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/sink"
)

// faultSource writes one Parquet file of n rows (row groups of 1000).
func faultSource(t *testing.T, n int64) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, n, 1000); err != nil {
		t.Fatal(err)
	}
	return src
}

// idCounts reads the table back and counts duplicates and missing ids against [0, n).
func idCounts(t *testing.T, dir string, n int64) (dups, missing int64) {
	t.Helper()
	seen := map[int64]int{}
	for _, r := range scan(t, dir) {
		id, ok := r["id"].(int64)
		if !ok {
			t.Fatalf("row without an int64 id: %v", r)
		}
		seen[id]++
	}
	for id := range n {
		switch c := seen[id]; {
		case c == 0:
			missing++
		case c > 1:
			dups += int64(c - 1)
		}
	}
	return dups, missing
}

// TestConnectionCutMidStream: a TCP proxy between loader and sink cuts every connection once a
// quarter of the data went through; the load reconnects, replays what was not acknowledged and the
// table holds each row once.
//
// The allocator is not checked for leaks: gRPC (v1.85) does not give back the messages queued on a
// connection that broke (its write loop exits without freeing its streams' queues), so the frames
// among them never see their last Release and are left to the garbage collector, which is safe.
func TestConnectionCutMidStream(t *testing.T) {
	mem := memory.DefaultAllocator
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_, endpoint := startSink(t, wh)
	proxy, err := tcpproxy.New(endpoint[len("grpc://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	src := faultSource(t, 6000)
	cfg := baseConfig(t, mem, src)
	cfg.Endpoint, cfg.Streams, cfg.RetryBackoff = "grpc://"+proxy.Addr(), 2, 10*time.Millisecond
	proxy.CutAfter(256 << 10)
	sum := run(t, cfg)
	if proxy.Cuts() != 1 || sum.Retries == 0 {
		t.Errorf("%d cuts, %d retries; want 1 cut survived by retrying", proxy.Cuts(), sum.Retries)
	}
	if !sum.Deduplicated || sum.PossiblyDuplicatedRows != 0 {
		t.Errorf("summary: deduplicated %v, %d possibly duplicated; want true, 0", sum.Deduplicated, sum.PossiblyDuplicatedRows)
	}
	checkTable(t, dir, fixture.IDs(0, 6000), fixture.Expected)
}

// TestAckTimeoutReconnects: the sink stores the first call's frames but never acknowledges them; the
// stream notices with its ack timeout, reconnects and sends them again, and they are stored once.
func TestAckTimeoutReconnects(t *testing.T) {
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_, endpoint := startSink(t, wh, sink.WithFaults(sink.Faults{SilentCalls: 1}))
	cfg := baseConfig(t, memory.DefaultAllocator, faultSource(t, 3000))
	cfg.Endpoint, cfg.Streams, cfg.AckTimeout, cfg.RetryBackoff = endpoint, 1, 300*time.Millisecond, 10*time.Millisecond
	sum := run(t, cfg)
	if sum.Retries == 0 {
		t.Error("no retry; want the silent call timed out and retried")
	}
	checkTable(t, dir, fixture.IDs(0, 3000), fixture.Expected)
}

// TestRotationContinuesWithoutLoss: the sink asks every call to rotate after a few frames.
func TestRotationContinuesWithoutLoss(t *testing.T) {
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_, endpoint := startSink(t, wh, sink.WithFaults(sink.Faults{RotateAfterFrames: 3, RotateGrace: 50 * time.Millisecond}))
	cfg := baseConfig(t, memory.DefaultAllocator, faultSource(t, 5000))
	cfg.Endpoint = endpoint
	run(t, cfg)
	checkTable(t, dir, fixture.IDs(0, 5000), fixture.Expected)
}

// TestRetriesRunOut: a burst of Unavailable longer than the retries ends the load with a clear
// error; the manifest stays consistent, and once the sink recovers a re-run loads each row once.
func TestRetriesRunOut(t *testing.T) {
	dir, wh := newWarehouse(t, fixture.TableColumns)
	srv, endpoint := startSink(t, wh, sink.WithFaults(sink.Faults{UnavailableCalls: 1000}))
	cfg := baseConfig(t, memory.DefaultAllocator, faultSource(t, 4000))
	cfg.Endpoint, cfg.Streams, cfg.Retries, cfg.RetryBackoff = endpoint, 1, 2, time.Millisecond
	sum, err := load.Run(context.Background(), cfg)
	if err == nil || sum == nil {
		t.Fatalf("Run = %v, %v; want a failure after 2 retries", sum, err)
	}
	if sum.Error == "" || sum.Rows != 0 || sum.Retries != 2 {
		t.Errorf("summary = %+v; want the error, 2 retries and nothing acknowledged", sum)
	}
	srv.SetFaults(sink.Faults{})
	again := run(t, cfg)
	if sum.Rows+again.Rows < 4000 {
		t.Errorf("runs acknowledged %d + %d rows; want at least 4000", sum.Rows, again.Rows)
	}
	checkTable(t, dir, fixture.IDs(0, 4000), fixture.Expected)
}

// TestResentRowsReportedWithoutDedupe: against a sink that does not deduplicate, rows sent again
// after a dropped call are counted, and the count covers the duplicates the table really holds.
func TestResentRowsReportedWithoutDedupe(t *testing.T) {
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_, endpoint := startSink(t, wh, sink.WithUnitIDs(false), sink.WithFaults(sink.Faults{DropAfterFrames: 5, DropCalls: 3}))
	cfg := baseConfig(t, memory.DefaultAllocator, faultSource(t, 4000))
	cfg.Endpoint, cfg.Streams, cfg.RetryBackoff = endpoint, 2, time.Millisecond
	sum := run(t, cfg)
	dups, missing := idCounts(t, dir, 4000)
	if missing != 0 {
		t.Errorf("%d ids missing", missing)
	}
	if sum.Deduplicated || sum.PossiblyDuplicatedRows == 0 || sum.PossiblyDuplicatedRows < dups {
		t.Errorf("table holds %d duplicates, summary says %d possibly duplicated (deduplicated %v); want a count covering them",
			dups, sum.PossiblyDuplicatedRows, sum.Deduplicated)
	}
}

// TestReplaysWithTheLoadsAllocator replays frames (connections cut, calls rotated and dropped) with
// the allocator a load uses by default, a pool that hands released memory out again. A frame
// references its batch's buffers rather than copying them, so a batch given back before all of its
// frames were acknowledged and written out would go on the wire as later batches' bytes: the table
// must hold exactly the source's values. (Not checked for leaks: see TestConnectionCutMidStream.)
func TestReplaysWithTheLoadsAllocator(t *testing.T) {
	mem := bufpool.New()
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_, endpoint := startSink(t, wh, sink.WithFaults(sink.Faults{
		RotateAfterFrames: 5, RotateGrace: 20 * time.Millisecond, DropAfterFrames: 7, DropCalls: 3}))
	proxy, err := tcpproxy.New(endpoint[len("grpc://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	const rows = 20000
	cfg := baseConfig(t, mem, faultSource(t, rows))
	cfg.Endpoint, cfg.RetryBackoff = "grpc://"+proxy.Addr(), 5*time.Millisecond
	proxy.CutAfter(512 << 10)
	sum := run(t, cfg)
	if sum.Retries == 0 {
		t.Errorf("no retries; want the cut and the dropped calls replayed")
	}
	checkTable(t, dir, fixture.IDs(0, rows), fixture.Expected)
}
