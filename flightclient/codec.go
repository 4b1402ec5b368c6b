package flightclient

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/loaderproject/loader/partitioner"
)

// refMin is the smallest body segment frameCodec references rather than copies: below it a copy costs
// less than gRPC's bookkeeping for one more buffer.
const refMin = 4 << 10

// frameCodec is the protobuf codec, except that it marshals a data frame without copying its body: the
// envelope (header, app_metadata and the body's tag and length) and the body's small segments go into
// a small buffer, and its large segments, which are the Arrow buffers of the batch the frame was cut
// from, are referenced as they are. So a frame's bytes go from the decoded batch to gRPC's write
// buffer with no copy in between. The wire bytes are those protobuf writes (fields in number order,
// empty ones left out). It relies on a frame's bytes never being modified while it is held, which
// the partitioner's frames are not. Everything else, PutResults included, goes through the standard
// codec.
type frameCodec struct{ base encoding.CodecV2 }

var wireCodec = frameCodec{base: encoding.GetCodecV2(proto.Name)}

// callCodec is the call option that installs frameCodec on a DoPut.
var callCodec = grpc.ForceCodecV2(wireCodec)

// commitFirst makes gRPC commit a DoPut (give up replaying it on a transparent retry) with its first
// message, the schema frame, so that the data frames after it are never kept for a replay. gRPC
// v1.85 leaks the reference it takes on a message kept for one when the call commits while that
// SendMsg runs (a RecvMsg of the first acknowledgement commits it): the frame is then never
// released (clientStream.withRetry calls onSuccess, whose bufferForRetryLocked returns early on a
// committed stream without its cleanup). A DoPut that fails after its first message is the
// loader's to send again (it replays what was not acknowledged), as any later failure is.
var commitFirst = grpc.MaxRetryRPCBufferSize(0)

func (c frameCodec) Name() string { return c.base.Name() }

func (c frameCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

// framedData is a data frame on its way to the wire: the FlightData's header and app_metadata, and
// the frame whose body it carries. A held frame is retained for each segment gRPC is given by
// reference: gRPC frees each buffer once its bytes are written out, or dropped with the call, and
// only then does frameRef release the frame.
type framedData struct {
	header, appMetadata []byte
	frame               *partitioner.Frame
}

// frameRef is the mem.BufferPool of one reference to a frame: putting the buffer back releases it.
type frameRef struct{ f *partitioner.Frame }

func (r frameRef) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (r frameRef) Put(*[]byte)       { r.f.Release() }

func (c frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*framedData)
	if !ok {
		return c.base.Marshal(v)
	}
	f := m.frame
	n := f.BodyLen()
	small := 0 // the bytes of the body copied next to the envelope
	if f.Held() {
		for _, s := range f.Segments() {
			if !referenced(s) {
				small += len(s)
			}
		}
	}
	b := make([]byte, 0, len(m.header)+len(m.appMetadata)+32+small)
	if len(m.header) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, m.header)
	}
	if len(m.appMetadata) > 0 {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, m.appMetadata)
	}
	if n == 0 {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	b = protowire.AppendTag(b, 1000, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	if !f.Held() {
		// A frame made by hand holds nothing: its body is its owner's, referenced while gRPC writes it.
		return mem.BufferSlice{mem.SliceBuffer(b), mem.SliceBuffer(f.Body)}, nil
	}
	var out mem.BufferSlice
	start := 0 // b[start:] is not in out yet
	for _, s := range f.Segments() {
		if !referenced(s) {
			b = append(b, s...)
			continue
		}
		if len(b) > start {
			out = append(out, mem.SliceBuffer(b[start:len(b):len(b)]))
			start = len(b)
		}
		// Counted by gRPC (referenced segments are above its pooling threshold), so the frame's
		// buffers stay its own until gRPC frees this one (TestFrameCodecHoldsFrames).
		f.Retain()
		seg := s
		out = append(out, mem.NewBuffer(&seg, frameRef{f}))
	}
	if len(b) > start {
		out = append(out, mem.SliceBuffer(b[start:]))
	}
	return out, nil
}

// referenced says whether frameCodec references a segment of a held frame rather than copy it: a
// large one, which gRPC counts (mem.NewBuffer counts buffers by their capacity).
func referenced(s []byte) bool {
	return len(s) >= refMin && !mem.IsBelowBufferPoolingThreshold(cap(s))
}
