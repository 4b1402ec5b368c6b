package sink

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"
)

// frameSeeds are FlightData encodings: protobuf's own, and hand-made ones with repeated, unknown,
// mistyped and truncated fields.
func frameSeeds(t testing.TB) [][]byte {
	full, err := protobuf.Marshal(&flight.FlightData{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"c", "s", "t"}},
		DataHeader:       []byte("header"),
		AppMetadata:      []byte(`{"offset":0}`),
		DataBody:         bytes.Repeat([]byte{7}, 1000),
	})
	if err != nil {
		t.Fatal(err)
	}
	var hand []byte
	hand = protowire.AppendTag(hand, 1000, protowire.BytesType)
	hand = protowire.AppendBytes(hand, []byte("first body"))
	hand = protowire.AppendTag(hand, 99, protowire.VarintType) // unknown
	hand = protowire.AppendVarint(hand, 5)
	hand = protowire.AppendTag(hand, 2, protowire.VarintType) // a known field, mistyped: unknown
	hand = protowire.AppendVarint(hand, 1)
	hand = protowire.AppendTag(hand, 1, protowire.BytesType) // descriptor, twice: merged
	hand = protowire.AppendBytes(hand, []byte{0x08, 0x01})
	hand = protowire.AppendTag(hand, 1, protowire.BytesType)
	hand = protowire.AppendBytes(hand, []byte{0x1a, 0x01, 'p'})
	hand = protowire.AppendTag(hand, 3, protowire.BytesType) // empty
	hand = protowire.AppendBytes(hand, nil)
	hand = protowire.AppendTag(hand, 1000, protowire.BytesType) // the last body wins
	hand = protowire.AppendBytes(hand, []byte("second body"))
	return [][]byte{nil, full, hand, full[:len(full)-1], hand[:5], {0x00}, {0x0a, 0x05, 0x08}, {0x0c}}
}

// checkFrameCodec checks that frameCodec unmarshals b as protobuf does: the same error-ness and, when
// both succeed, the same fields.
func checkFrameCodec(t *testing.T, b []byte) {
	var want flight.FlightData
	wantErr := protobuf.Unmarshal(b, &want)
	// Split across buffers, as gRPC hands a message over.
	var data mem.BufferSlice
	for rest := b; len(rest) > 0; {
		n := min(len(rest), 3)
		data = append(data, mem.SliceBuffer(rest[:n]))
		rest = rest[n:]
	}
	got := flight.FlightData{DataBody: []byte("stale")}
	gotErr := serverCodec.Unmarshal(data, &got)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("Unmarshal(%x) = %v; protobuf says %v", b, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	if !bytes.Equal(got.DataHeader, want.DataHeader) || !bytes.Equal(got.AppMetadata, want.AppMetadata) || !bytes.Equal(got.DataBody, want.DataBody) ||
		!protobuf.Equal(got.FlightDescriptor, want.FlightDescriptor) {
		t.Fatalf("Unmarshal(%x) = header %q, metadata %q, body %d bytes, descriptor %v; protobuf gives %q, %q, %d bytes, %v",
			b, got.DataHeader, got.AppMetadata, len(got.DataBody), got.FlightDescriptor, want.DataHeader, want.AppMetadata, len(want.DataBody), want.FlightDescriptor)
	}
}

// TestFrameCodecAsProtobuf checks frameCodec against protobuf's unmarshalling on well-formed and
// malformed frames, and that the body it returns is its own copy, not the buffers gRPC reuses.
func TestFrameCodecAsProtobuf(t *testing.T) {
	for _, b := range frameSeeds(t) {
		checkFrameCodec(t, b)
	}
	full := frameSeeds(t)[1]
	src := bytes.Clone(full)
	var fd flight.FlightData
	if err := serverCodec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(src)}, &fd); err != nil {
		t.Fatal(err)
	}
	clear(src)
	if !bytes.Equal(fd.DataBody, bytes.Repeat([]byte{7}, 1000)) || string(fd.DataHeader) != "header" {
		t.Errorf("after gRPC's buffer was reused: header %q, body %x...; want the frame's own", fd.DataHeader, fd.DataBody[:8])
	}
	var act flight.Action // anything else goes through protobuf
	b, _ := protobuf.Marshal(&flight.Action{Type: "x", Body: []byte("y")})
	if err := serverCodec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &act); err != nil || act.Type != "x" || string(act.Body) != "y" {
		t.Errorf("Unmarshal(Action) = %v, %v", &act, err)
	}
}

// FuzzFrameCodec checks frameCodec against protobuf's unmarshalling on arbitrary bytes.
func FuzzFrameCodec(f *testing.F) {
	for _, b := range frameSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(checkFrameCodec)
}
