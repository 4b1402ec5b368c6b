package flightclient_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/zerobus"
)

// ackServer decodes every frame and acknowledges it at once: the client's ceiling on this machine
// (client and server share its cores).
type ackServer struct{ flight.BaseFlightServer }

func (*ackServer) DoPut(stream flight.FlightService_DoPutServer) error {
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return err
	}
	defer rdr.Release()
	if err := stream.Send(&flight.PutResult{AppMetadata: zerobus.Ready().Marshal()}); err != nil {
		return err
	}
	var rows, frames int64
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
		ack := zerobus.Ack{Offset: frames, Records: rows}
		frames++
		if err := stream.Send(&flight.PutResult{AppMetadata: ack.Marshal()}); err != nil {
			return err
		}
	}
	return rdr.Err()
}

// BenchmarkLoad measures Load's throughput against the number of streams (one connection per
// stream, up to 4), with 2 MiB frames, against an in-process server that acknowledges every frame.
func BenchmarkLoad(b *testing.B) {
	addr := serve(b, &ackServer{})
	fx := newFixture(b, memory.DefaultAllocator, 1_000_000, partitioner.DefaultMaxFrameBytes)
	var total int64
	for _, f := range fx.frames {
		total += int64(f.Size())
	}
	for _, streams := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			c, err := flightclient.New("grpc://"+addr, flightclient.Zerobus, flightclient.WithConnections(min(streams, 4)))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				if _, err := c.Load(ctx, tableName, nil, fx.enc, streams, produce(ctx, fx.frames), nil); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			b.ReportMetric(float64(fx.rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
