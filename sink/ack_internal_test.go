package sink

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
)

// fakeDoPut records what the ack goroutine sends.
type fakeDoPut struct {
	grpc.ServerStream
	sent []string
}

func (f *fakeDoPut) Send(r *flight.PutResult) error {
	f.sent = append(f.sent, string(r.GetAppMetadata()))
	return nil
}
func (f *fakeDoPut) Recv() (*flight.FlightData, error) { select {} }

// TestAckCoalescing: frames that are durable together get one ack, and the rotation signal rides
// on the first ack that covers its frame.
func TestAckCoalescing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults streamFaults
		want   []string
	}{
		{"coalesced", streamFaults{}, []string{`{"ack_up_to_offset":4,"ack_up_to_records":50}`}},
		{"rotation on a coalesced ack", streamFaults{rotateAfter: 2, rotateMs: 7},
			[]string{`{"ack_up_to_offset":4,"ack_up_to_records":50,"close_stream_duration_ms":7}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeDoPut{}
			p := &putStream{stream: fs, faults: tc.faults}
			acks := make(chan ackItem, 10)
			for i := range 5 { // already durable: nothing to wait for
				acks <- ackItem{offset: int64(i), records: int64(i+1) * 10}
			}
			close(acks)
			if err := p.ackLoop(context.Background(), acks); err != nil {
				t.Fatal(err)
			}
			if len(fs.sent) != len(tc.want) || fs.sent[0] != tc.want[0] {
				t.Errorf("sent %v; want %v", fs.sent, tc.want)
			}
		})
	}
}
