package sink_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/metadata"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
	"github.com/loaderproject/loader/zerobus"
)

// subprocessEnv makes the test binary run a sink over the named warehouse instead of the tests.
const subprocessEnv = "LOADER_SINK_TEST_SERVE_DIR"

// runSubprocessServer serves until SIGTERM (graceful) or SIGKILL, printing "listening on ADDR" on
// stderr once ready, as `loader serve` does.
func runSubprocessServer(dir string) int {
	wh, err := warehouse.Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := sink.New(wh, sink.WithCommitInterval(20*time.Millisecond), sink.WithWALSegmentBytes(256<<10))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		<-srv.Ready()
		fmt.Fprintf(os.Stderr, "listening on %s\n", lis.Addr())
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "shutdown:", err)
		}
	}()
	if err := srv.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startSubprocess re-executes the test binary as a sink over dir and returns it with its address.
func startSubprocess(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), subprocessEnv+"="+dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok && !sent {
				addr <- a
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			cmd.Wait()
			t.Fatal("subprocess sink exited before it was ready")
		}
		return cmd, a
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("subprocess sink did not print its address")
	}
	return nil, ""
}

// TestKill9 streams from several clients into a sink in another process, SIGKILLs it mid-stream,
// restarts it on the same directory, and checks that every acknowledged row is committed exactly
// once (and no row twice).
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test")
	}
	dir := t.TempDir()
	wh, err := warehouse.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := tableschema.TableName{Catalog: "main", Schema: "default", Table: "k9"}
	ts, _ := tableschema.ParseColumns("id BIGINT NOT NULL, s STRING, d DOUBLE")
	if _, err := wh.CreateTable(t.Context(), name, ts); err != nil {
		t.Fatal(err)
	}
	schema := ts.Arrow()

	proc, addr := startSubprocess(t, dir)
	conn := dial(t, addr)
	defer conn.Close()
	client := flight.NewFlightServiceClient(conn)

	const streams, per = 4, 200
	acked := make([]atomic.Int64, streams) // rows acknowledged on each stream
	var total atomic.Int64
	killNow := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for k := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := metadata.AppendToOutgoingContext(context.Background(), zerobus.HeaderTableName, name.String())
			st, err := client.DoPut(ctx)
			if err != nil {
				return
			}
			schemaFrame, _ := encode(t, schema, nil)
			if _, err := setup(st, schemaFrame); err != nil {
				t.Errorf("stream %d setup: %v", k, err)
				return
			}
			recvDone := make(chan struct{})
			go func() {
				defer close(recvDone)
				for {
					res, err := st.Recv()
					if err != nil {
						return
					}
					a, err := zerobus.ParseAck(res.GetAppMetadata())
					if err != nil {
						t.Errorf("ack: %v", err)
						return
					}
					acked[k].Store(a.Records)
					if total.Add(per) > 6000 {
						once.Do(func() { close(killNow) })
					}
				}
			}()
			for i := int64(0); ; i++ {
				rec := batch(t, memory.DefaultAllocator, schema, int64(k)*10_000_000+i*per, per)
				_, data := encode(t, schema, []arrow.RecordBatch{rec})
				rec.Release()
				if err := st.Send(withOffset(data[0], i)); err != nil {
					break // the server died
				}
			}
			<-recvDone
		}()
	}
	<-killNow
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.Wait()
	wg.Wait()
	conn.Close()

	var want int64
	for k := range streams {
		want += acked[k].Load()
	}
	if want == 0 {
		t.Fatal("nothing was acknowledged before the kill")
	}

	proc2, addr2 := startSubprocess(t, dir)
	defer func() {
		proc2.Process.Signal(syscall.SIGTERM)
		if err := proc2.Wait(); err != nil {
			t.Errorf("restarted sink exited with %v", err)
		}
	}()
	conn2 := dial(t, addr2)
	defer conn2.Close()
	e2 := &env{t: t, client: flight.NewFlightServiceClient(conn2)}
	var c sinkapi.CountResult
	if err := e2.action(t.Context(), sinkapi.ActionFlush, []byte(name.String()), &c); err != nil {
		t.Fatal(err)
	}
	got := scan(t, wh, name) // fails on a duplicate id
	if int64(len(got)) != c.Committed {
		t.Errorf("scan found %d rows; count says %d", len(got), c.Committed)
	}
	for k := range streams {
		for i := int64(0); i < acked[k].Load(); i++ {
			id := int64(k)*10_000_000 + i
			if _, ok := got[id]; !ok {
				t.Fatalf("acknowledged row %d (stream %d) was lost", id, k)
			}
		}
	}
	t.Logf("acknowledged %d rows before SIGKILL; %d committed after restart", want, len(got))
}

// ingest sends frames of per rows with ids [from, from+frames*per) over one Zerobus stream and
// waits for the final ack.
func (e *env) ingest(name tableschema.TableName, schema *arrow.Schema, from int64, frames, per int) {
	e.t.Helper()
	var recs []arrow.RecordBatch
	for i := range frames {
		recs = append(recs, batch(e.t, memory.DefaultAllocator, schema, from+int64(i*per), int64(per)))
	}
	schemaFrame, data := encode(e.t, schema, recs)
	for _, r := range recs {
		r.Release()
	}
	st := e.zerobus(context.Background(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		e.t.Fatal(err)
	}
	for i, fd := range data {
		if err := st.Send(withOffset(fd, int64(i))); err != nil {
			e.t.Fatal(err)
		}
	}
	acks, err := drain(st)
	if err != nil {
		e.t.Fatalf("ingest: %v", err)
	}
	if last := acks[len(acks)-1]; last.Records != int64(frames*per) {
		e.t.Fatalf("last ack %s; want %d rows", last.Marshal(), frames*per)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := os.Create(filepath.Join(to, rel))
		if err != nil {
			return err
		}
		defer dst.Close()
		_, err = io.Copy(dst, src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryCommitsOnce: rows acknowledged but never committed (the final commit was cut off)
// are committed by the next Serve before it is ready, and a third start adds nothing.
func TestRecoveryCommitsOnce(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir, sink.WithCommitInterval(time.Hour))
	name, ts := e.createTable("main.default.r", "id BIGINT NOT NULL, s STRING")
	e.ingest(name, ts.Arrow(), 0, 10, 30)

	// Shut down with an expired context: the final commit is skipped, the rows stay in the log.
	e.down = true
	e.conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.srv.Shutdown(ctx); err == nil || !strings.Contains(err.Error(), "write-ahead log") {
		t.Errorf("Shutdown(expired) = %v; want an error saying the rows stay in the log", err)
	}
	<-e.served
	tbl, _ := e.wh.Table(t.Context(), name)
	if n, _, _ := tbl.Count(t.Context()); n != 0 {
		t.Fatalf("committed %d rows before restart; want 0", n)
	}
	if p, err := sink.PendingRows(t.Context(), tbl); err != nil || p != 300 {
		t.Fatalf("PendingRows = %d, %v; want 300 (read without a server)", p, err)
	}

	for round := range 2 {
		e2 := start(t, dir, sink.WithCommitInterval(time.Hour))
		tbl, _ := e2.wh.Table(t.Context(), name)
		if n, _, _ := tbl.Count(t.Context()); n != 300 {
			t.Errorf("round %d: committed %d rows once ready; want 300", round, n)
		}
		e2.stop()
	}
	sameRows(t, scan(t, e.wh, name), expected(t, ts.Arrow(), [2]int64{0, 300}))
}

// TestCrashAfterCommitBeforeCleanup restores log segments that were already committed, as if the
// sink died between the Delta commit and deleting them: recovery must not commit them again.
func TestCrashAfterCommitBeforeCleanup(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir, sink.WithCommitInterval(time.Hour), sink.WithWALSegmentBytes(8<<10))
	name, ts := e.createTable("main.default.c", "id BIGINT NOT NULL, s STRING")
	for i := range 5 { // separate calls, so separate group commits and several segments
		e.ingest(name, ts.Arrow(), int64(i*100), 4, 25)
	}
	tbl, _ := e.wh.Table(t.Context(), name)
	logDir := filepath.Join(tbl.Dir(), "_sink", "wal")
	backup := t.TempDir()
	copyDir(t, logDir, backup)

	before, _ := filepath.Glob(filepath.Join(logDir, "*.wal"))
	if c := e.flushCount(name); c.Committed != 500 {
		t.Fatalf("committed %d; want 500", c.Committed)
	}
	after, _ := filepath.Glob(filepath.Join(logDir, "*.wal"))
	if len(before) < 3 || len(after) != 1 {
		t.Errorf("log segments: %d before the commit, %d after; want several, then only the active one", len(before), len(after))
	}
	e.ingest(name, ts.Arrow(), 1000, 4, 25) // more rows, committed at shutdown
	e.stop()

	// Put the committed segments back.
	if err := os.RemoveAll(logDir); err != nil {
		t.Fatal(err)
	}
	copyDir(t, backup, logDir)

	e2 := start(t, dir, sink.WithCommitInterval(time.Hour))
	c := e2.flushCount(name)
	if c.Committed != 600 || c.Acknowledged != 0 {
		t.Errorf("after restart: %+v; want 600 committed", c)
	}
	// New records are numbered above the table's txn version, not above the restored log's last
	// record, or their commit would be taken for a replay and skipped.
	e2.ingest(name, ts.Arrow(), 2000, 2, 25)
	if c := e2.flushCount(name); c.Committed != 650 {
		t.Errorf("rows ingested after the restart: committed %d; want 650", c.Committed)
	}
	sameRows(t, scan(t, e2.wh, name), expected(t, ts.Arrow(), [2]int64{0, 500}, [2]int64{1000, 100}, [2]int64{2000, 50}))
}

// TestSecondServerRefused: a second sink over the same warehouse cannot take a table's log.
func TestSecondServerRefused(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir)
	name, ts := e.createTable("main.default.l", "id BIGINT NOT NULL")
	e.ingest(name, ts.Arrow(), 0, 1, 5)

	wh, _ := warehouse.Open(dir)
	srv := sink.New(wh)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Serve(lis)
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Errorf("second Serve() = %v; want a lock error", err)
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown after failed Serve = %v", err)
	}
}

// TestShutdownWithStreamsInFlight: streams that are open when Shutdown starts end cleanly with
// Unavailable after their acks, and every acknowledged row is committed.
func TestShutdownWithStreamsInFlight(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir, sink.WithCommitInterval(time.Hour))
	name, ts := e.createTable("main.default.s", "id BIGINT NOT NULL, s STRING")
	schema := ts.Arrow()
	schemaFrame, _ := encode(t, schema, nil)

	const streams = 3
	var sts []flight.FlightService_DoPutClient
	for k := range streams {
		st := e.zerobus(t.Context(), name.String(), "")
		if _, err := setup(st, schemaFrame); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			rec := batch(t, memory.DefaultAllocator, schema, int64(k*100+i*10), 10)
			_, data := encode(t, schema, []arrow.RecordBatch{rec})
			rec.Release()
			if err := st.Send(withOffset(data[0], int64(i))); err != nil {
				t.Fatal(err)
			}
		}
		// Wait until all three frames are acknowledged; the stream then stays open, idle.
		for {
			res, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := zerobus.ParseAck(res.GetAppMetadata()); a.Records == 30 {
				break
			}
		}
		sts = append(sts, st)
	}
	done := make(chan error, 1)
	go func() { done <- e.srv.Shutdown(context.Background()) }()
	for k, st := range sts {
		_, err := st.Recv()
		if s := statusOf(t, err); s.Code() != 14 /* Unavailable */ {
			t.Errorf("stream %d ended with %v; want Unavailable", k, err)
		}
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown() = %v", err)
	}
	if err := <-e.served; err != nil {
		t.Errorf("Serve() = %v", err)
	}
	e.down = true
	e.conn.Close()
	e.mem.AssertSize(t, 0)
	tbl, _ := e.wh.Table(t.Context(), name)
	if n, _, _ := tbl.Count(t.Context()); n != streams*30 {
		t.Errorf("committed %d rows after shutdown; want %d", n, streams*30)
	}
}

// TestPreCancelled: blocking APIs return at once on a cancelled context.
func TestPreCancelled(t *testing.T) {
	e := start(t, "")
	name, _ := e.createTable("main.default.p", "id BIGINT NOT NULL")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := e.srv.Flush(ctx, name); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush(cancelled) = %v; want context.Canceled", err)
	}
	tbl, _ := e.wh.Table(t.Context(), name)
	if _, err := sink.PendingRows(ctx, tbl); !errors.Is(err, context.Canceled) {
		t.Errorf("PendingRows(cancelled) = %v; want context.Canceled", err)
	}
	if err := e.action(ctx, sinkapi.ActionCount, []byte(name.String()), nil); err == nil {
		t.Error("DoAction(cancelled) succeeded")
	}
}

// TestShutdownCutsOffStuckCalls: a client that opened a DoPut and never sent its schema cannot hold
// Shutdown past its context; the call is cut off and nothing leaks.
func TestShutdownCutsOffStuckCalls(t *testing.T) {
	e := start(t, "", sink.WithCommitInterval(time.Hour))
	name, ts := e.createTable("main.default.stuck", "id BIGINT NOT NULL")
	e.ingest(name, ts.Arrow(), 0, 1, 5)
	st := e.zerobus(context.Background(), name.String(), "") // no schema frame, ever
	recvErr := make(chan error, 1)
	go func() { _, err := st.Recv(); recvErr <- err }()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	e.down = true
	// The deadline is spent waiting for the stuck call, so the final commit is skipped and says so.
	if err := e.srv.Shutdown(ctx); err == nil || !strings.Contains(err.Error(), "stay in the write-ahead log") {
		t.Errorf("Shutdown() = %v; want the skipped final commit reported", err)
	}
	if err := <-e.served; err != nil {
		t.Errorf("Serve() = %v", err)
	}
	if err := <-recvErr; err == nil {
		t.Error("the stuck call ended without an error")
	}
	e.conn.Close()
	e.mem.AssertSize(t, 0)
	tbl, _ := e.wh.Table(t.Context(), name)
	if p, err := sink.PendingRows(t.Context(), tbl); err != nil || p != 5 {
		t.Errorf("PendingRows = %d, %v; want the 5 acknowledged rows in the log", p, err)
	}
	e2 := start(t, e.wh.Dir())
	if c := e2.flushCount(name); c.Committed != 5 {
		t.Errorf("after restart: %+v; want 5 committed", c)
	}
}
