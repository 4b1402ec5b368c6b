package bench

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/demodata"
	"github.com/loaderproject/loader/internal/flighttest"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// countingServer is a plain Flight DoPut server that reads every frame and counts the data bytes.
type countingServer struct {
	flight.BaseFlightServer
	bytes, frames atomic.Int64
}

func (s *countingServer) DoPut(stream flight.FlightService_DoPutServer) error {
	for {
		fd, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(fd.GetDataBody()) > 0 {
			s.bytes.Add(int64(len(fd.GetDataHeader()) + len(fd.GetDataBody())))
			s.frames.Add(1)
		}
	}
}

// demoConfig is a decode of a small generated dataset.
func demoConfig(t *testing.T) (load.Config, *tableschema.Schema) {
	t.Helper()
	dir := t.TempDir()
	if _, err := demodata.Generate(context.Background(), dir, demodata.Options{Rows: 3000, Files: 2, RowGroupRows: 500}); err != nil {
		t.Fatal(err)
	}
	s, err := tableschema.FromArrow(demodata.Schema())
	if err != nil {
		t.Fatal(err)
	}
	return load.Config{Sources: []string{dir}, Table: DefaultTable, TableSchema: s, Decoders: 2, MaxFrameBytes: 16 << 10}, s
}

func TestSendPrefix(t *testing.T) {
	cfg, schema := demoConfig(t)
	const frame = 16 << 10
	tests := []struct {
		name     string
		limit    int64
		complete bool
	}{
		{"the whole dataset, sent once", maxPrefixBytes, true},
		{"a prefix, sent round and round", 100 << 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := encodePrefix(context.Background(), cfg, schema, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if p.complete != tt.complete || p.bytes > tt.limit || len(p.frames) < 2 {
				t.Fatalf("encodePrefix(limit %d) = %d frames, %d bytes, complete %v; want complete %v", tt.limit, len(p.frames), p.bytes, p.complete, tt.complete)
			}
			if tt.complete && p.rows != 3000 {
				t.Errorf("the complete prefix holds %d rows; want 3000", p.rows)
			}
			srv := &countingServer{}
			addr := flighttest.Serve(t, srv)
			total := 3 * p.bytes
			rows, bytes, err := sendPrefix(context.Background(), p, "grpc://"+addr, flightclient.Flight, DefaultTable, total, 3, 2)
			if err != nil {
				t.Fatalf("sendPrefix: %v", err)
			}
			want := total
			if tt.complete {
				want = p.bytes
			}
			if bytes != srv.bytes.Load() || bytes < want || bytes >= want+frame {
				t.Errorf("sendPrefix() = %d bytes (%d rows), the server got %d; want %d, at most a frame more", bytes, rows, srv.bytes.Load(), want)
			}
		})
	}
}

func TestSendPrefixCancelled(t *testing.T) {
	cfg, schema := demoConfig(t)
	p, err := encodePrefix(context.Background(), cfg, schema, maxPrefixBytes)
	if err != nil {
		t.Fatal(err)
	}
	addr := flighttest.Serve(t, &countingServer{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := sendPrefix(ctx, p, "grpc://"+addr, flightclient.Flight, DefaultTable, 1<<40, 2, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("sendPrefix(cancelled) = %v; want context.Canceled", err)
	}
}

func TestCastToTheCanonicalTypes(t *testing.T) {
	cfg, schema := demoConfig(t)
	files, err := readers.Discover(context.Background(), cfg.Sources)
	if err != nil {
		t.Fatal(err)
	}
	// Not a checked allocator: arrow-go v18.8.0's cast of a list to a list of another element type
	// leaves some buffers to the garbage collector (compute.CastArray, as the hand-written rival
	// calls it).
	mem := memory.DefaultAllocator
	rdr, done, err := openRecords(context.Background(), files[0], 700, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	defer rdr.Release()
	want := schema.Arrow()
	n := 0
	for rdr.Next() {
		rec, err := castTo(context.Background(), rdr.RecordBatch(), want, mem)
		if err != nil {
			t.Fatalf("castTo: %v", err)
		}
		if !rec.Schema().Equal(want) || rec.NumRows() != rdr.RecordBatch().NumRows() {
			t.Errorf("castTo() = %s with %d rows; want %s", rec.Schema(), rec.NumRows(), want)
		}
		rec.Release()
		n++
	}
	if rdr.Err() != nil || n < 2 {
		t.Errorf("read %d batches, %v; want several", n, rdr.Err())
	}
}
