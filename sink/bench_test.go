package sink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/zerobus"
)

// benchFrame encodes one frame of roughly size bytes of (id, s, d) rows.
func benchFrame(b *testing.B, schema *arrow.Schema, size int) (*flight.FlightData, *flight.FlightData, int64) {
	const rowBytes = 8 + 8 + 100 + 8 // id, offset, string, double
	rows := max(1, size/rowBytes)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	for i := range rows {
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		bld.Field(1).(*array.LargeStringBuilder).Append(fmt.Sprintf("%0100d", i))
		bld.Field(2).(*array.Float64Builder).Append(float64(i) / 7)
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	schemaFrame, data := encode(b, schema, []arrow.RecordBatch{rec})
	return schemaFrame, data[0], int64(rows)
}

// BenchmarkIngest measures Zerobus ingest through the real gRPC path: bytes per second of frames
// acknowledged, by frame size and stream count, in three modes:
//   - durable: as served, acks after the write-ahead log's fsync, the committer writing Parquet and
//     Delta commits every second alongside;
//   - log-only: acks after the fsync, with no commit during the run (the commit happens at shutdown,
//     outside the timer): the ceiling of the ack path;
//   - discard: validated, decoded and acknowledged, not stored.
func BenchmarkIngest(b *testing.B) {
	for _, mode := range []string{"durable", "log-only", "discard"} {
		for _, size := range []int{64 << 10, 512 << 10, 2 << 20} {
			for _, streams := range []int{1, 4} {
				b.Run(fmt.Sprintf("%s/frame=%dKiB/streams=%d", mode, size>>10, streams), func(b *testing.B) {
					opts := []sink.Option{sink.WithDiscard(mode == "discard")}
					if mode == "log-only" {
						opts = append(opts, sink.WithCommitInterval(time.Hour))
					}
					benchIngest(b, size, streams, opts...)
				})
			}
		}
	}
}

func benchIngest(b *testing.B, size, streams int, opts ...sink.Option) {
	e := start(b, "", opts...)
	name, ts := e.createTable("main.default.bench", "id BIGINT NOT NULL, s STRING, d DOUBLE")
	schemaFrame, frame, rows := benchFrame(b, ts.Arrow(), size)
	frameBytes := int64(len(frame.DataHeader) + len(frame.DataBody))

	per := make([]int, streams)
	for i := range b.N {
		per[i%streams]++
	}
	sts := make([]flight.FlightService_DoPutClient, streams)
	for k := range streams {
		sts[k] = e.zerobus(context.Background(), name.String(), "")
		if _, err := setup(sts[k], schemaFrame); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(frameBytes)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for k, st := range sts {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range per[k] {
				if err := st.Send(&flight.FlightData{DataHeader: frame.DataHeader, DataBody: frame.DataBody,
					AppMetadata: zerobus.FrameMetadata(int64(i))}); err != nil {
					b.Error(err)
					return
				}
			}
			st.CloseSend()
		}()
		go func() {
			defer wg.Done()
			var last zerobus.Ack
			for {
				res, err := st.Recv()
				if err != nil {
					break
				}
				last, _ = zerobus.ParseAck(res.GetAppMetadata())
			}
			if last.Records != int64(per[k])*rows && per[k] > 0 {
				b.Errorf("stream %d: last ack %d rows; want %d", k, last.Records, int64(per[k])*rows)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(int64(b.N)*rows)/b.Elapsed().Seconds(), "rows/s")
}
