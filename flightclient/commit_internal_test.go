package flightclient

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loaderproject/loader/partitioner"
)

// ackEvery is a Flight server whose DoPut acknowledges every message as it arrives.
type ackEvery struct{ flight.BaseFlightServer }

func (*ackEvery) DoPut(s flight.FlightService_DoPutServer) error {
	for {
		if _, err := s.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := s.Send(&flight.PutResult{}); err != nil {
			return err
		}
	}
}

// TestCommitFirstReleasesEveryFrame sends encoded frames, by reference, on many DoPuts at once to a
// server that acknowledges each message at once, so calls commit (on their first acknowledgement)
// while data frames are being sent. Without commitFirst gRPC v1.85 kept a reference to some of them
// for a transparent retry and never dropped it (about 35 of 24,000 messages), and their batches
// were never released: the checked allocator finds any.
func TestCommitFirstReleasesEveryFrame(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := int64Batch(mem, 40_000, 3)
	enc, err := partitioner.NewEncoder(rec.Schema(), 16<<10, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	frames := encodeFrames(t, enc, rec)
	rec.Release()
	defer func() {
		for _, f := range frames {
			f.Release()
		}
	}()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	flight.RegisterFlightServiceServer(gs, &ackEvery{})
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := flight.NewFlightServiceClient(cc)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 300 {
				ps, err := client.DoPut(t.Context(), callCodec, commitFirst)
				if err != nil {
					t.Error(err)
					return
				}
				acks := make(chan struct{})
				go func() {
					defer close(acks)
					for {
						if _, err := ps.Recv(); err != nil {
							return
						}
					}
				}()
				_ = ps.Send(&flight.FlightData{DataHeader: enc.SchemaMessage()})
				for _, f := range frames[:min(10, len(frames))] {
					_ = ps.SendMsg(&framedData{header: f.Header, frame: f})
				}
				_ = ps.CloseSend()
				<-acks
			}
		})
	}
	wg.Wait()
}
