package sink

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"
)

// frameCodec is the server's protobuf codec, except that it unmarshals a FlightData with one copy
// instead of two: gRPC's standard codec first gathers the message's buffers into one, then protobuf
// copies each bytes field out of it. frameCodec gathers the message into a buffer of its own and
// points data_header, app_metadata and data_body into it (the buffer is the message's, freed by the
// garbage collector with it, so nothing is aliased that gRPC reuses). The fields come out as
// protobuf's own unmarshalling gives them (the last occurrence of a bytes field wins, an embedded
// descriptor is merged, unknown fields, and known ones of another wire type, are skipped, a malformed message is an error); only empty
// bytes fields differ, as empty rather than nil, which no reader tells apart. Every other message
// goes through the standard codec.
type frameCodec struct{ base encoding.CodecV2 }

var serverCodec = frameCodec{base: encoding.GetCodecV2(proto.Name)}

func (c frameCodec) Name() string { return c.base.Name() }

func (c frameCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	fd, ok := v.(*flight.FlightData)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	if err := unmarshalFlightData(data.Materialize(), fd); err != nil {
		return fmt.Errorf("failed to unmarshal, message is %T, want proto.Message: %w", v, err)
	}
	return nil
}

// FlightData's field numbers (Flight.proto).
const (
	fdDescriptor  = 1
	fdDataHeader  = 2
	fdAppMetadata = 3
	fdDataBody    = 1000
)

// unmarshalFlightData sets fd from the protobuf encoding b, with its bytes fields pointing into b.
func unmarshalFlightData(b []byte, fd *flight.FlightData) error {
	fd.Reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("FlightData: invalid field number %d", num)
		}
		b = b[n:]
		switch num {
		case fdDescriptor, fdDataHeader, fdAppMetadata, fdDataBody:
			if typ != protowire.BytesType {
				break // as protobuf does: a known field of another wire type is an unknown field
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			switch num {
			case fdDescriptor:
				if fd.FlightDescriptor == nil {
					fd.FlightDescriptor = &flight.FlightDescriptor{}
				}
				if err := (protobuf.UnmarshalOptions{Merge: true}).Unmarshal(v, fd.FlightDescriptor); err != nil {
					return err
				}
			case fdDataHeader:
				fd.DataHeader = v
			case fdAppMetadata:
				fd.AppMetadata = v
			case fdDataBody:
				fd.DataBody = v
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}
