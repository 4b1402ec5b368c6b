package sink

import (
	"context"
	"io"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// queuedDoPut hands out queued frames, then io.EOF.
type queuedDoPut struct {
	grpc.ServerStream
	ctx    context.Context
	frames []*flight.FlightData
}

func (q *queuedDoPut) Context() context.Context     { return q.ctx }
func (q *queuedDoPut) Send(*flight.PutResult) error { return nil }
func (q *queuedDoPut) Recv() (*flight.FlightData, error) {
	if len(q.frames) == 0 {
		return nil, io.EOF
	}
	fd := q.frames[0]
	q.frames = q.frames[1:]
	return fd, nil
}

// TestThrottledStreamPace: in a synctest bubble (virtual time) a stream capped at 1 MB/s takes
// (bytes − burst) / rate to read, header, body and app_metadata counted, frames larger than the
// burst included.
func TestThrottledStreamPace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames []int // body bytes of each frame; each also has a 100-byte header
	}{
		{"small frames", slices.Repeat([]int{10_000}, 50)},
		{"one frame of several bursts", []int{1_000_000}},
		{"mixed", []int{50, 400_000, 3, 1_500_000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const rate = 1_000_000
				q := &queuedDoPut{ctx: t.Context()}
				total := 0
				for _, n := range tc.frames {
					q.frames = append(q.frames, &flight.FlightData{DataHeader: make([]byte, 100), DataBody: make([]byte, n), AppMetadata: []byte("{}")})
					total += 100 + n + 2
				}
				ts := newThrottledStream(q, rate)
				start := time.Now()
				got := 0
				for {
					fd, err := ts.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got += len(fd.DataHeader) + len(fd.DataBody) + len(fd.AppMetadata)
				}
				if got != total {
					t.Fatalf("read %d bytes; want %d", got, total)
				}
				if total <= ts.lim.Burst() {
					t.Fatalf("%d bytes fit in one burst (%d): the case cannot show the pace", total, ts.lim.Burst())
				}
				want := time.Duration(float64(max(total-ts.lim.Burst(), 0)) / rate * float64(time.Second))
				if elapsed := time.Since(start); elapsed.Round(time.Millisecond) != want.Round(time.Millisecond) {
					t.Errorf("reading %d bytes at %d B/s (burst %d) took %v; want %v", total, rate, ts.lim.Burst(), elapsed, want)
				}
			})
		})
	}
}

// TestThrottledStreamCancelled: a call that ends while it waits for its pace gets the context's
// status, not a frame.
func TestThrottledStreamCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		q := &queuedDoPut{ctx: ctx, frames: []*flight.FlightData{{DataBody: make([]byte, 10<<20)}}}
		ts := newThrottledStream(q, 1<<20) // ten seconds of bytes
		time.AfterFunc(time.Second, cancel)
		fd, err := ts.Recv()
		if fd != nil || status.Code(err) != codes.Canceled {
			t.Errorf("Recv() = %v, %v; want nil, Canceled", fd, err)
		}
	})
}
