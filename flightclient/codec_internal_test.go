package flightclient

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	protolib "google.golang.org/protobuf/proto"

	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/zerobus"
)

// TestFrameCodec checks that the zero-copy codec writes exactly what protobuf writes, and that the
// result reads back.
func TestFrameCodec(t *testing.T) {
	body := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, zeroCopyMin/8+3)
	tests := []struct {
		name     string
		fd       *flight.FlightData
		zeroCopy bool // the body is referenced, not copied
	}{
		{"data frame", &flight.FlightData{DataHeader: []byte("header"), AppMetadata: zerobus.FrameMetadata(7), DataBody: body}, true},
		{"no metadata", &flight.FlightData{DataHeader: []byte("header"), DataBody: body}, true},
		{"descriptor (standard codec)", &flight.FlightData{
			FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b", "c"}},
			DataHeader:       []byte("h"), DataBody: body}, false},
		{"small body (standard codec)", &flight.FlightData{DataHeader: []byte("h"), DataBody: []byte("tiny")}, false},
		{"schema frame", &flight.FlightData{DataHeader: []byte("schema")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wireCodec.Marshal(tt.fd)
			if err != nil {
				t.Fatal(err)
			}
			want, err := protolib.Marshal(tt.fd)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Materialize(), want) {
				t.Errorf("Marshal() differs from protobuf's encoding")
			}
			if tt.zeroCopy {
				last := got[len(got)-1].ReadOnlyData()
				if len(last) != len(body) || &last[0] != &body[0] {
					t.Errorf("Marshal() copied the body; want it referenced as the last buffer")
				}
			}
			var back flight.FlightData
			if err := wireCodec.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if !protolib.Equal(&back, tt.fd) {
				t.Errorf("Unmarshal(Marshal()) = %v; want %v", &back, tt.fd)
			}
		})
	}
	if wireCodec.Name() != "proto" {
		t.Errorf("Name() = %q; want proto", wireCodec.Name())
	}
}

// TestFrameCodecHoldsPooledFrames checks that a pooled frame's bytes stay the frame's while gRPC
// holds the marshalled body, even after the frame's owner released it (an acknowledgement can
// arrive before a failed call's transport lets go): they return to the pool only when gRPC frees
// the body, and frames encoded meanwhile get other buffers.
func TestFrameCodecHoldsPooledFrames(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	const limit = 256 << 10
	enc, err := partitioner.NewEncoder(schema, limit, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	// batch returns a record of int64 values, every one of them fill.
	batch := func(fill int64) arrow.RecordBatch {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		for range limit / 8 {
			b.Append(fill)
		}
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	}
	encode := func(fill int64) []*partitioner.Frame {
		rec := batch(fill)
		defer rec.Release()
		var frames []*partitioner.Frame
		if err := enc.Encode(rec, partitioner.Span{}, func(f *partitioner.Frame) error {
			frames = append(frames, f)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return frames
	}

	first := encode(1)[0]
	if !first.Pooled() {
		t.Fatalf("a frame of %d bytes (limit %d) is not pooled", first.Size(), limit)
	}
	want := bytes.Clone(first.Body)
	wire, err := wireCodec.Marshal(&framedData{fd: &flight.FlightData{DataHeader: first.Header, DataBody: first.Body}, frame: first})
	if err != nil {
		t.Fatal(err)
	}
	first.Release() // acknowledged: the owner lets go while gRPC still holds the body
	for i := range 8 {
		for _, f := range encode(int64(i + 2)) {
			f.Release() // straight back to the pool, to be handed out again
		}
	}
	if got := wire[len(wire)-1].ReadOnlyData(); !bytes.Equal(got, want) {
		t.Fatalf("the body gRPC holds changed after the owner's release: a later frame reused its buffer")
	}
	wire.Free() // gRPC done: the last reference
	defer func() {
		if recover() == nil {
			t.Errorf("a release after gRPC freed the body did not panic: the frame was not counted down to zero")
		}
	}()
	first.Release()
}
