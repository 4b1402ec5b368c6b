package flightclient

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	protolib "google.golang.org/protobuf/proto"

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
