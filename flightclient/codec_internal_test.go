package flightclient

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	protolib "google.golang.org/protobuf/proto"

	"github.com/loaderproject/loader/internal/bufpool"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/zerobus"
)

// int64Batch returns a batch of rows int64 values and rows strings, every value from fill.
func int64Batch(mem memory.Allocator, rows int, fill int64) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(fill)
		if i%3 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(string(rune('a' + fill%26)))
		}
	}
	return b.NewRecordBatch()
}

// encodeFrames encodes rec into frames of at most limit bytes.
func encodeFrames(t *testing.T, enc *partitioner.Encoder, rec arrow.RecordBatch) []*partitioner.Frame {
	t.Helper()
	var frames []*partitioner.Frame
	if err := enc.Encode(rec, partitioner.Span{}, func(f *partitioner.Frame) error {
		frames = append(frames, f)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return frames
}

// TestFrameCodec checks that the zero-copy codec writes exactly what protobuf writes for the same
// FlightData, that the result reads back, and that it references the large segments of an encoded
// frame's body and copies the small ones.
func TestFrameCodec(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := int64Batch(mem, 20_000, 7)
	defer rec.Release()
	enc, err := partitioner.NewEncoder(rec.Schema(), 1<<20, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	small := rec.NewSlice(0, 3)
	defer small.Release()
	encoded := encodeFrames(t, enc, rec)[0]
	tiny := encodeFrames(t, enc, small)[0]
	defer encoded.Release()
	defer tiny.Release()
	body := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, refMin/8+3)
	tests := []struct {
		name  string
		data  *framedData
		refer bool // large segments are referenced, not copied
	}{
		{"encoded frame", &framedData{header: encoded.Header, appMetadata: zerobus.FrameMetadata(7), frame: encoded}, true},
		{"encoded frame, no metadata", &framedData{header: encoded.Header, frame: encoded}, true},
		{"small encoded frame", &framedData{header: tiny.Header, appMetadata: zerobus.FrameMetadata(1), frame: tiny}, false},
		{"frame made by hand", &framedData{header: []byte("header"), appMetadata: []byte("m"), frame: &partitioner.Frame{Header: []byte("header"), Body: body}}, false},
		{"no body", &framedData{header: []byte("header"), frame: &partitioner.Frame{Header: []byte("header")}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wireCodec.Marshal(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Free()
			fd := &flight.FlightData{DataHeader: tt.data.header, AppMetadata: tt.data.appMetadata, DataBody: tt.data.frame.AppendBody(nil)}
			want, err := protolib.Marshal(fd)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Materialize(), want) {
				t.Errorf("Marshal() differs from protobuf's encoding")
			}
			if tt.refer {
				refs := 0
				for _, s := range tt.data.frame.Segments() {
					for _, b := range got {
						if d := b.ReadOnlyData(); len(s) >= refMin && len(d) == len(s) && &d[0] == &s[0] {
							refs++
						}
					}
				}
				if refs == 0 {
					t.Errorf("Marshal() copied every segment of the body; want the large ones referenced")
				}
			}
			var back flight.FlightData
			if err := wireCodec.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if !protolib.Equal(&back, fd) {
				t.Errorf("Unmarshal(Marshal()) differs from the FlightData")
			}
		})
	}
	// Everything else goes through protobuf's codec.
	schemaFrame := &flight.FlightData{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b", "c"}},
		DataHeader:       []byte("schema")}
	got, err := wireCodec.Marshal(schemaFrame)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := protolib.Marshal(schemaFrame); !bytes.Equal(got.Materialize(), want) {
		t.Errorf("Marshal(schema frame) differs from protobuf's encoding")
	}
	if wireCodec.Name() != "proto" {
		t.Errorf("Name() = %q; want proto", wireCodec.Name())
	}
}

// TestFrameCodecHoldsFrames checks that a frame's buffers stay the frame's while gRPC holds the
// marshalled body, even after the frame's owner released it and the batch is gone (an
// acknowledgement can arrive before a failed call's transport lets go): they are freed only when gRPC
// frees the body, and batches encoded meanwhile, through an allocator that hands freed memory out
// again, get other memory.
func TestFrameCodecHoldsFrames(t *testing.T) {
	mem := memory.NewCheckedAllocator(bufpool.New())
	defer mem.AssertSize(t, 0)
	const rows = 40_000
	schema := int64Batch(mem, 0, 0)
	enc, err := partitioner.NewEncoder(schema.Schema(), 1<<20, partitioner.WithAllocator(mem))
	schema.Release()
	if err != nil {
		t.Fatal(err)
	}
	encode := func(fill int64) []*partitioner.Frame {
		rec := int64Batch(mem, rows, fill)
		defer rec.Release()
		return encodeFrames(t, enc, rec)
	}

	first := encode(1)[0]
	if !first.Held() {
		t.Fatalf("an encoded frame holds nothing")
	}
	wire, err := wireCodec.Marshal(&framedData{header: first.Header, frame: first})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(wire.Materialize())
	first.Release() // acknowledged: the owner lets go while gRPC still holds the body
	for i := range 8 {
		for _, f := range encode(int64(i + 2)) {
			f.Release() // the batch's memory straight back to the pool, to be handed out again
		}
	}
	if !bytes.Equal(wire.Materialize(), want) {
		t.Fatalf("the body gRPC holds changed after the owner's release: a later batch reused its memory")
	}
	wire.Free() // gRPC done: the last reference
	defer func() {
		if recover() == nil {
			t.Errorf("a release after gRPC freed the body did not panic: the frame was not counted down to zero")
		}
	}()
	first.Release()
}
