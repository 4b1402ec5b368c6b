package flightclient_test

import (
	"context"
	"fmt"
	"net"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
)

// Load a batch into a Zerobus-speaking endpoint over two streams, releasing each frame's budget
// once it is acknowledged.
func ExampleClient_Load() {
	// A server that acknowledges every frame (see bench_test.go), standing in for a real target.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	gs := grpc.NewServer()
	flight.RegisterFlightServiceServer(gs, &ackServer{})
	go gs.Serve(lis)
	defer gs.Stop()

	table, _ := tableschema.ParseTableName("main.sales.orders")
	cols, _ := tableschema.ParseColumns("id BIGINT NOT NULL, s STRING")
	schema := cols.Arrow()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range int64(10_000) {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.LargeStringBuilder).Append(fmt.Sprint("row ", i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()

	enc, err := partitioner.NewEncoder(schema, 16<<10)
	if err != nil {
		panic(err)
	}
	c, err := flightclient.New("grpc://"+lis.Addr().String(), flightclient.Zerobus, flightclient.WithToken("token"))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	budget := partitioner.NewBudget(1 << 20)
	frames := make(chan *partitioner.Frame)
	go func() {
		defer close(frames)
		_ = enc.Encode(rec, partitioner.Span{}, func(f *partitioner.Frame) error {
			if err := budget.Acquire(ctx, int64(f.Size())); err != nil {
				f.Release()
				return err
			}
			frames <- f // Load releases it once acknowledged
			return nil
		})
	}()
	stats, err := c.Load(ctx, table, schema, enc, 2, frames, func(f *partitioner.Frame) {
		budget.Release(int64(f.Size())) // rows [f.Span.Row, f.Span.Row+f.Rows) are durable
	})
	fmt.Println(err, stats.Rows, budget.InUse())
	// Output: <nil> 10000 0
}
