package flightclient_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/zerobus"
)

// checked returns a checked allocator verified when the test ends (after the server stopped).
func checked(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// TestLoadZerobusHappy runs four streams over two connections; each stream may hold one frame, and
// the server holds the first acknowledgement of every call until four calls are open, so every stream
// must have opened its own DoPut.
func TestLoadZerobusHappy(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.token = "s3cret"
	const streams = 4
	var (
		barrierMu sync.Mutex
		open      int
		allOpen   = make(chan struct{})
	)
	srv.onSetup = func(c *call) error {
		barrierMu.Lock()
		defer barrierMu.Unlock()
		if open++; open == streams {
			close(allOpen)
		}
		return nil
	}
	srv.onFrame = func(c *call) error {
		if len(c.frameEnds) == 1 {
			select {
			case <-allOpen:
			case <-c.stream.Context().Done():
				return c.stream.Context().Err()
			}
		}
		return c.ackAll()
	}
	srv.start(t)
	fx := newFixture(t, mem, 5000, 4<<10)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus,
		flightclient.WithToken("s3cret"), flightclient.WithConnections(2), flightclient.WithStreamCap(1))
	stats, _ := loadAll(t.Context(), t, c, fx, streams)
	srv.checkDurable(t, fx.rows)
	if stats.Frames != int64(len(fx.frames)) || stats.Rows != fx.rows || stats.Streams != streams {
		t.Errorf("Stats = %+v; want %d frames, %d rows, %d streams", stats, len(fx.frames), fx.rows, streams)
	}
	if stats.Retries != 0 || stats.Rotations != 0 || stats.Calls != streams {
		t.Errorf("Stats = %+v; want no retries or rotations and %d calls", stats, streams)
	}
	if got := len(srv.peers); got != 2 {
		t.Errorf("the server saw %d client connections; want 2", got)
	}
}

// TestLoadCoalescedAndPartialAcks acks at arbitrary row counts, in the middle of frames, coalescing
// several frames, and checks frames are reported in order and only once complete.
func TestLoadCoalescedAndPartialAcks(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.onFrame = func(c *call) error {
		// Ack 7 rows less than received every third frame: always mid-frame.
		if len(c.frameEnds)%3 != 0 {
			return nil
		}
		return c.ack(int64(len(c.rows))-7, nil)
	}
	srv.start(t)
	fx := newFixture(t, mem, 3000, 2<<10)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus)
	_, log := loadAll(t.Context(), t, c, fx, 1)
	srv.checkDurable(t, fx.rows)
	// One stream reports in order.
	if !slices.Equal(log.frames, fx.frames) {
		t.Error("frames reported out of order on a single stream")
	}
}

// TestLoadReplayAfterUnavailable fails the first call after acknowledging part of a frame; the second
// call must start exactly at the first unacknowledged row, with offsets from 0.
func TestLoadReplayAfterUnavailable(t *testing.T) {
	for _, c := range []partitioner.Compression{partitioner.CompressionNone, partitioner.CompressionLZ4, partitioner.CompressionZSTD} {
		t.Run(c.String(), func(t *testing.T) { testReplayAfterUnavailable(t, c) })
	}
}

func testReplayAfterUnavailable(t *testing.T, compression partitioner.Compression) {
	mem := checked(t)
	srv := newServer(t, mem)
	var partial int64
	srv.onFrame = func(c *call) error {
		if c.n > 0 {
			return c.ackAll()
		}
		switch len(c.frameEnds) {
		case 2:
			// Half of the second frame.
			partial = c.frameEnds[0] + (c.frameEnds[1]-c.frameEnds[0])/2
			return c.ack(partial, nil)
		case 4:
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	}
	srv.start(t)
	fx := newFixture(t, mem, 2000, 2<<10, partitioner.WithCompression(compression))
	c := testClient(t, srv.endpoint(), flightclient.Zerobus)
	stats, _ := loadAll(t.Context(), t, c, fx, 1)
	srv.checkDurable(t, fx.rows)
	if stats.Retries != 1 {
		t.Errorf("Stats.Retries = %d; want 1", stats.Retries)
	}
	second := srv.call(1)
	if len(second.rows) == 0 || second.rows[0].id != partial {
		t.Fatalf("the second call starts at row %v; want the first unacknowledged row %d", second.rows[:1], partial)
	}
	for i, r := range second.rows {
		if r.id != partial+int64(i) {
			t.Fatalf("second call row %d is id %d; want %d (the unacknowledged rows, in order)", i, r.id, partial+int64(i))
		}
	}
	// The re-sliced frame fits the limit and holds only the rest of the second frame.
	if got, want := second.frameEnds[0], fx.frames[0].Rows+fx.frames[1].Rows-partial; got != want {
		t.Errorf("the first frame of the second call holds %d rows; want the %d unacknowledged rows of the split frame", got, want)
	}
}

func TestLoadSchemaError(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.table = mustColumns("id BIGINT NOT NULL, s STRING, qty INT NOT NULL")
	srv.start(t)
	fx := newFixture(t, mem, 100, 1<<20)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus)
	stats, log, err := load(t.Context(), t, c, fx, 2)
	se, ok := zerobus.AsSchemaError(err)
	if !ok {
		t.Fatalf("Load() = %v; want a schema error", err)
	}
	if !se.Has(zerobus.CauseMissingRequiredColumn) || !strings.Contains(err.Error(), `"qty"`) {
		t.Errorf("schema error %v (causes %v); want MISSING_REQUIRED_COLUMN naming qty", err, se.Causes)
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("status.Code(err) = %s; want InvalidArgument", status.Code(err))
	}
	if stats.Retries != 0 || len(log.frames) != 0 {
		t.Errorf("Stats = %+v, %d frames reported; want no retry and nothing reported", stats, len(log.frames))
	}
}

func TestLoadRotation(t *testing.T) {
	for _, tt := range []struct {
		name string
		// ackBeforeClose: the server acks what it received when the client half-closes the rotated
		// call; otherwise those frames must be replayed.
		ackBeforeClose bool
	}{
		{"acked before close", true},
		{"replayed", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := checked(t)
			srv := newServer(t, mem)
			grace := uint64(20)
			srv.onFrame = func(c *call) error {
				switch {
				case c.n > 0:
					return c.ackAll()
				case len(c.frameEnds) == 3:
					return c.ack(c.frameEnds[1], &grace) // two frames durable, rotate
				case len(c.frameEnds) > 3:
					return status.Error(codes.Internal, "a frame arrived after the rotation request")
				}
				return nil
			}
			srv.onEOF = func(c *call) error {
				if c.n == 0 && !tt.ackBeforeClose {
					return nil
				}
				return c.ackAll()
			}
			srv.start(t)
			fx := newFixture(t, mem, 3000, 2<<10)
			c := testClient(t, srv.endpoint(), flightclient.Zerobus, flightclient.WithStreamCap(3*int64(fx.frames[0].Size())))
			stats, _ := loadAll(t.Context(), t, c, fx, 1)
			srv.checkDurable(t, fx.rows)
			if stats.Rotations != 1 || stats.Retries != 0 {
				t.Errorf("Stats = %+v; want 1 rotation, no retry", stats)
			}
			first := srv.call(0)
			if len(first.frameEnds) != 3 {
				t.Errorf("the rotated call received %d frames; want 3", len(first.frameEnds))
			}
			second := srv.call(1)
			wantStart := first.frameEnds[1]
			if tt.ackBeforeClose {
				wantStart = first.frameEnds[2]
			}
			if second.rows[0].id != wantStart {
				t.Errorf("the new call starts at row %d; want %d", second.rows[0].id, wantStart)
			}
		})
	}
}

func TestLoadAckTimeout(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.onFrame = stallFirstCall(func(c *call) error { return c.ackAll() }) // never ack the first
	srv.start(t)
	fx := newFixture(t, mem, 500, 2<<10)
	// The timeout is short for the test; on a loaded machine it may also cut a healthy call whose
	// ack was late, which at-least-once delivery allows: so check for no loss, not for no duplicate.
	loadRetried(t, srv, fx, flightclient.WithAckTimeout(50*time.Millisecond))
	srv.checkDurableAtLeastOnce(t, fx.rows)
}

func TestLoadReadyTimeout(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.onSetup = stallFirstCall(func(*call) error { return nil }) // no READY on the first
	srv.start(t)
	fx := newFixture(t, mem, 100, 1<<20)
	loadRetried(t, srv, fx, flightclient.WithReadyTimeout(50*time.Millisecond))
	srv.checkDurable(t, fx.rows)
}

// stallFirstCall is a server hook that holds the first call until the client gives up on it, and
// answers the others with next.
func stallFirstCall(next func(c *call) error) func(c *call) error {
	return func(c *call) error {
		if c.n == 0 {
			<-c.stream.Context().Done()
			return c.stream.Context().Err()
		}
		return next(c)
	}
}

// loadRetried loads fx over one Zerobus stream with timeout, an option that makes the client give
// up on a stalled call, and fast retries, and checks that at least one call was retried.
func loadRetried(t *testing.T, srv *server, fx *fixture, timeout flightclient.Option) {
	t.Helper()
	c := testClient(t, srv.endpoint(), flightclient.Zerobus, timeout, flightclient.WithRetry(20, time.Millisecond, time.Millisecond))
	stats, _ := loadAll(t.Context(), t, c, fx, 1)
	if stats.Retries < 1 {
		t.Errorf("Stats.Retries = %d; want at least 1", stats.Retries)
	}
}

func TestLoadProtocolViolations(t *testing.T) {
	tests := []struct {
		name    string
		onSetup func(c *call) error
		onFrame func(c *call) error
	}{
		{"ack beyond rows sent", nil, func(c *call) error { return c.ack(int64(len(c.rows))+1, nil) }},
		{"first answer not READY", func(c *call) error {
			return c.sendRaw(zerobus.Ack{Offset: 0, Records: 5}.Marshal())
		}, nil},
		{"ack not JSON", nil, func(c *call) error { return c.sendRaw([]byte("ok")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := checked(t)
			srv := newServer(t, mem)
			srv.onSetup, srv.onFrame = tt.onSetup, tt.onFrame
			if tt.onFrame != nil {
				srv.onEOF = func(*call) error { return nil }
			}
			srv.start(t)
			fx := newFixture(t, mem, 100, 1<<20)
			c := testClient(t, srv.endpoint(), flightclient.Zerobus)
			stats, _, err := load(t.Context(), t, c, fx, 1)
			if !errors.Is(err, zerobus.ErrProtocol) {
				t.Fatalf("Load() = %v; want a protocol error", err)
			}
			if stats.Retries != 0 {
				t.Errorf("Stats.Retries = %d; want 0 (a protocol violation is fatal)", stats.Retries)
			}
		})
	}
}

func TestLoadFatalStatuses(t *testing.T) {
	for _, code := range []codes.Code{codes.NotFound, codes.PermissionDenied, codes.InvalidArgument} {
		t.Run(code.String(), func(t *testing.T) {
			stats, calls, err := loadRejected(t, status.Error(code, "injected"))
			if status.Code(err) != code {
				t.Fatalf("Load() = %v; want %s", err, code)
			}
			if stats.Retries != 0 || calls != 1 {
				t.Errorf("Stats.Retries = %d after %d calls; want 0 after 1", stats.Retries, calls)
			}
		})
	}
}

func TestLoadWrongToken(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.token = "right"
	srv.start(t)
	fx := newFixture(t, mem, 10, 1<<20)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus, flightclient.WithToken("wrong"))
	if _, _, err := load(t.Context(), t, c, fx, 1); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Load() = %v; want Unauthenticated", err)
	}
}

func TestLoadRetriesExhausted(t *testing.T) {
	stats, calls, err := loadRejected(t, status.Error(codes.Unavailable, "down"), flightclient.WithRetry(2, time.Millisecond, time.Millisecond))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "giving up after 2 retries") {
		t.Fatalf("Load() = %v; want Unavailable after 2 retries", err)
	}
	if stats.Retries != 2 || calls != 3 {
		t.Errorf("Stats.Retries = %d, calls = %d; want 2 and 3", stats.Retries, calls)
	}
}

// loadRejected loads a few rows with opts through a server that answers every call's setup with
// setupErr, and returns the load's stats, the number of calls the server saw and the load's error.
func loadRejected(t *testing.T, setupErr error, opts ...flightclient.Option) (flightclient.Stats, int, error) {
	t.Helper()
	mem := checked(t)
	srv := newServer(t, mem)
	srv.onSetup = func(*call) error { return setupErr }
	srv.start(t)
	fx := newFixture(t, mem, 10, 1<<20)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus, opts...)
	stats, _, err := load(t.Context(), t, c, fx, 1)
	return stats, srv.callCount(), err
}

// TestLoadTokenPerCall checks the token source is asked on every DoPut, reconnections included.
func TestLoadTokenPerCall(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.token = "t"
	srv.onFrame = func(c *call) error {
		if c.n == 0 {
			return status.Error(codes.Unavailable, "injected")
		}
		return c.ackAll()
	}
	srv.start(t)
	fx := newFixture(t, mem, 100, 1<<20)
	var asked atomic.Int64
	c := testClient(t, srv.endpoint(), flightclient.Zerobus, flightclient.WithTokenSource(func(context.Context) (string, error) {
		asked.Add(1)
		return "t", nil
	}))
	loadAll(t.Context(), t, c, fx, 1)
	if got := asked.Load(); got != 2 {
		t.Errorf("token source asked %d times; want 2 (one per DoPut)", got)
	}
}

// TestLoadStreamCap checks that a stream holds exactly as many unacknowledged frames as its cap
// allows: it takes frames while its unacknowledged bytes are below the cap. The server acks nothing
// until the client reports (through a test hook) that it stopped, and checks the stop came exactly
// where the frame sizes say it must.
func TestLoadStreamCap(t *testing.T) {
	mem := checked(t)
	fx := newFixture(t, mem, 4000, 2<<10)
	sizes := map[int64]int64{} // first row → frame size
	for _, f := range fx.frames {
		sizes[f.Span.Row] = int64(f.Size())
	}
	// Exactly the first three frames: the first cycle ends with the cap reached exactly.
	capBytes := int64(fx.frames[0].Size() + fx.frames[1].Size() + fx.frames[2].Size())
	type stop struct {
		frames int
		bytes  int64
	}
	stops := make(chan stop, 1000)
	capHook := flightclient.WithCapHook(func(_, frames int, bytes int64) {
		stops <- stop{frames, bytes}
	})
	srv := newServer(t, mem)
	var problems []string
	cycles := 0
	srv.onFrame = func(c *call) error {
		var frames int
		var bytes int64
		start := int64(0)
		for _, end := range c.frameEnds {
			if end > c.acked {
				frames++
				bytes += sizes[c.rows[start].id]
			}
			start = end
		}
		if bytes < capBytes {
			return nil // the client may still take frames
		}
		// Here the client must have stopped: wait for it to say so, then ack everything.
		select {
		case st := <-stops:
			if st.frames != frames || st.bytes != bytes {
				problems = append(problems, fmt.Sprintf("client stopped with %d frames (%d bytes); the server holds %d frames (%d bytes)",
					st.frames, st.bytes, frames, bytes))
			}
		case <-c.stream.Context().Done():
			return c.stream.Context().Err()
		}
		cycles++
		return c.ackAll()
	}
	srv.start(t)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus, flightclient.WithStreamCap(capBytes), capHook)
	// A client that ignored its cap would never stop; bound the test so it fails instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stats, _ := loadAll(ctx, t, c, fx, 1)
	srv.checkDurable(t, fx.rows)
	for _, p := range problems {
		t.Error(p)
	}
	if cycles < len(fx.frames)/4 {
		t.Errorf("the client stopped at its cap %d times; want at least %d", cycles, len(fx.frames)/4)
	}
	if stats.Retries != 0 {
		t.Errorf("Stats.Retries = %d; want 0", stats.Retries)
	}
}

// TestLoadCancel cancels the load while frames wait for acknowledgements that never come.
func TestLoadCancel(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	received := make(chan struct{}, 1000)
	var firstRow, firstRows atomic.Int64
	srv.onFrame = func(c *call) error {
		if len(c.frameEnds) == 1 && c.n == 0 {
			firstRow.Store(c.rows[0].id)
			firstRows.Store(c.frameEnds[0])
			if err := c.ack(c.frameEnds[0], nil); err != nil { // the first frame is durable
				return err
			}
		}
		received <- struct{}{}
		return nil
	}
	srv.onEOF = func(*call) error { return nil }
	srv.start(t)
	fx := newFixture(t, mem, 2000, 2<<10)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pctx, stopProducer := context.WithCancel(t.Context())
	defer stopProducer()
	log := &ackLog{}
	reported := make(chan struct{}, 1)
	go func() {
		for range 4 {
			<-received
		}
		<-reported
		cancel() // frames are on the wire, unacknowledged, and the first one was reported
	}()
	stats, err := c.Load(ctx, tableName, arrowSchema(), fx.enc, 2, produce(pctx, fx.frames), func(f *partitioner.Frame) {
		log.acked(f)
		reported <- struct{}{}
	})
	log.close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Load() = %v; want context.Canceled", err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.late != 0 {
		t.Errorf("%d frames reported after Load returned", log.late)
	}
	if len(log.frames) != 1 || log.frames[0].Span.Row != firstRow.Load() || log.frames[0].Rows != firstRows.Load() || stats.Frames != 1 {
		t.Errorf("reported %d frames (stats %d); want only the one the server acknowledged", len(log.frames), stats.Frames)
	}
}

func TestLoadPreCancelled(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.start(t)
	fx := newFixture(t, mem, 10, 1<<20)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	frames := make(chan *partitioner.Frame, 1)
	frames <- fx.frames[0]
	_, err := c.Load(ctx, tableName, arrowSchema(), fx.enc, 2, frames, func(*partitioner.Frame) {
		t.Error("acked called on a cancelled load")
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Load(cancelled) = %v; want context.Canceled", err)
	}
	if n := srv.callCount(); n != 0 {
		t.Errorf("the server saw %d calls; want 0", n)
	}
	if len(frames) != 1 {
		t.Error("Load(cancelled) consumed a frame")
	}
}

func TestLoadBadArguments(t *testing.T) {
	mem := checked(t)
	fx := newFixture(t, mem, 10, 1<<20)
	c := testClient(t, "grpc://127.0.0.1:1", flightclient.Zerobus)
	frames := make(chan *partitioner.Frame)
	close(frames)
	bad := tableName
	bad.Table = "no-dashes"
	tests := []struct {
		name    string
		streams int
		enc     *partitioner.Encoder
		frames  <-chan *partitioner.Frame
		want    string
	}{
		{"zero streams", 0, fx.enc, frames, "streams"},
		{"nil encoder", 1, nil, frames, "encoder"},
		{"nil frames", 1, fx.enc, nil, "frames"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Load(t.Context(), tableName, nil, tt.enc, tt.streams, tt.frames, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load() = %v; want an error about %s", err, tt.want)
			}
		})
	}
	if _, err := c.Load(t.Context(), bad, nil, fx.enc, 1, frames, nil); err == nil {
		t.Error("Load(bad table name) = nil; want an error")
	}
	// No frames at all: nothing to do, no call opened.
	if _, err := c.Load(t.Context(), tableName, nil, fx.enc, 3, frames, nil); err != nil {
		t.Errorf("Load(no frames) = %v; want nil", err)
	}
}

// TestLoadServerEndsCall ends the first call in ways a client must recover from by replaying.
func TestLoadServerEndsCall(t *testing.T) {
	tests := []struct {
		name    string
		onSetup func(c *call) error
		onFrame func(c *call) error
	}{
		{"Unavailable right after READY", func(c *call) error {
			if c.n > 0 {
				return nil
			}
			if err := c.sendRaw(zerobus.Ready().Marshal()); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "going away")
		}, nil},
		{"OK with frames unacknowledged", nil, func(c *call) error {
			if c.n == 0 && len(c.frameEnds) == 2 {
				return errEndOK
			}
			return c.ackAll()
		}},
		{"Internal after a partial ack", nil, func(c *call) error {
			if c.n == 0 && len(c.frameEnds) == 3 {
				if err := c.ack(c.frameEnds[1]+1, nil); err != nil {
					return err
				}
				return status.Error(codes.Internal, "disk hiccup")
			}
			if c.n == 0 {
				return nil
			}
			return c.ackAll()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := checked(t)
			srv := newServer(t, mem)
			srv.onSetup, srv.onFrame = tt.onSetup, tt.onFrame
			srv.start(t)
			fx := newFixture(t, mem, 2000, 2<<10)
			c := testClient(t, srv.endpoint(), flightclient.Zerobus)
			stats, _ := loadAll(t.Context(), t, c, fx, 1)
			srv.checkDurable(t, fx.rows)
			if stats.Retries != 1 {
				t.Errorf("Stats.Retries = %d; want 1", stats.Retries)
			}
		})
	}
}
