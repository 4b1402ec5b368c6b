package flightclient

import (
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/loaderproject/loader/partitioner"
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

// framedData is a data frame's FlightData on its way to the wire, with the frame its body is. A
// pooled frame is retained for as long as gRPC holds the body: gRPC frees the buffer it is handed
// once the bytes are written out, or dropped with the call, and only then does frameRef release it.
type framedData struct {
	fd    *flight.FlightData
	frame *partitioner.Frame
}

// frameRef is the mem.BufferPool of one reference to a frame: putting the buffer back releases it.
type frameRef struct{ f *partitioner.Frame }

func (r frameRef) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (r frameRef) Put(*[]byte)       { r.f.Release() }

func (c frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	var frame *partitioner.Frame
	if m, ok := v.(*framedData); ok {
		v, frame = m.fd, m.frame
	}
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
	body := mem.Buffer(mem.SliceBuffer(fd.DataBody))
	if frame != nil && frame.Pooled() {
		// Counted by gRPC (bodies of zeroCopyMin bytes are far above its pooling threshold), so the
		// frame's bytes stay its own until gRPC frees the buffer (TestFrameCodecHoldsPooledFrames).
		frame.Retain()
		data := fd.DataBody
		body = mem.NewBuffer(&data, frameRef{frame})
	}
	return mem.BufferSlice{mem.SliceBuffer(b), body}, nil
}
