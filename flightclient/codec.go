package flightclient

import (
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// zeroCopyMin is the body size from which frameCodec references the body instead of copying it.
const zeroCopyMin = 32 << 10

// frameCodec is the protobuf codec, except that it marshals a data frame without copying its body: the
// envelope (header, app_metadata and the body's tag and length) goes into a small buffer and the body
// is referenced as it is, so a frame's bytes go from the encoder to the socket with no copy in between. The wire bytes are those protobuf writes (fields in number order, empty ones left
// out). It relies on frames never being modified after they are sent, which the partitioner's frames
// are not. Everything else, PutResults included, goes through the standard codec.
type frameCodec struct{ base encoding.CodecV2 }

var wireCodec = frameCodec{base: encoding.GetCodecV2(proto.Name)}

// callCodec is the call option that installs frameCodec on a DoPut.
var callCodec = grpc.ForceCodecV2(wireCodec)

func (c frameCodec) Name() string { return c.base.Name() }

func (c frameCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

func (c frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	fd, ok := v.(*flight.FlightData)
	if !ok || fd.FlightDescriptor != nil || len(fd.DataBody) < zeroCopyMin {
		return c.base.Marshal(v) // only the schema frame carries a descriptor, and it has no body
	}
	b := make([]byte, 0, len(fd.DataHeader)+len(fd.AppMetadata)+32)
	if len(fd.DataHeader) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, fd.DataHeader)
	}
	if len(fd.AppMetadata) > 0 {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, fd.AppMetadata)
	}
	b = protowire.AppendTag(b, 1000, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(fd.DataBody)))
	return mem.BufferSlice{mem.SliceBuffer(b), mem.SliceBuffer(fd.DataBody)}, nil
}
