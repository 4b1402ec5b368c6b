package readers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/pierrec/lz4/v4"
)

// RegisterParquetCodecs teaches arrow-go's Parquet reader what real files need and it lacks. arrow-go
// keeps codecs in a process-wide registry (compress.RegisterCodec, its documented extension point), so
// this affects every Parquet reader in the process; it runs once, and Open calls it.
//
//   - LZ4, the deprecated Parquet codec 5, which arrow-go leaves unimplemented: pages as Hadoop writes
//     them (frames of a big-endian uncompressed size, a big-endian compressed size and an LZ4 block),
//     falling back to one bare LZ4 block as old parquet-cpp wrote them, as Arrow C++ reads them.
//     Writing LZ4 stays unsupported (use LZ4_RAW).
//   - An empty compressed page (a V2 data page holding only levels) decodes to nothing for every codec,
//     instead of an error from decompressors that refuse empty input, such as Snappy.
var RegisterParquetCodecs = sync.OnceFunc(func() {
	for _, c := range []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Gzip, compress.Codecs.Brotli,
		compress.Codecs.Zstd, compress.Codecs.Lz4Raw} {
		codec, err := compress.GetCodec(c)
		if err != nil {
			continue
		}
		if sc, ok := codec.(compress.StreamingCodec); ok { // keep arrow-go's streaming reads of big pages
			compress.RegisterCodec(c, emptyPagesStreaming{emptyPages{codec}, sc})
		} else {
			compress.RegisterCodec(c, emptyPages{codec})
		}
	}
	compress.RegisterCodec(compress.Codecs.Lz4, emptyPages{hadoopLZ4{}})
})

// emptyPages decodes an empty page to nothing and delegates the rest.
type emptyPages struct{ compress.Codec }

func (c emptyPages) Decode(dst, src []byte) []byte {
	out, err := c.DecodeWithError(dst, src)
	if err != nil {
		panic(err) // compress.Decode recovers this, as for any codec without DecodeWithError
	}
	return out
}

func (c emptyPages) DecodeWithError(dst, src []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst[:0], nil
	}
	return compress.Decode(c.Codec, dst, src)
}

// emptyPagesStreaming is emptyPages for a codec that also streams.
type emptyPagesStreaming struct {
	emptyPages
	compress.StreamingCodec
}

// hadoopLZ4 decodes the deprecated LZ4 codec.
type hadoopLZ4 struct{}

var errLZ4Write = errors.New("parquet codec LZ4 (deprecated) cannot be written: use LZ4_RAW")

func (hadoopLZ4) Encode(dst, src []byte) []byte                 { panic(errLZ4Write) }
func (hadoopLZ4) EncodeLevel(dst, src []byte, level int) []byte { panic(errLZ4Write) }
func (hadoopLZ4) CompressBound(n int64) int64                   { return int64(lz4.CompressBlockBound(int(n))) + 8 }

func (h hadoopLZ4) Decode(dst, src []byte) []byte {
	out, err := h.DecodeWithError(dst, src)
	if err != nil {
		panic(err)
	}
	return out
}

// DecodeWithError decodes into dst's capacity, which the page reader sizes to the page's uncompressed
// length; a page that claims more is corrupt, so nothing is allocated on a corrupt length's say-so.
func (hadoopLZ4) DecodeWithError(dst, src []byte) ([]byte, error) {
	if out, ok := decodeHadoopFrames(dst[:cap(dst)], src); ok {
		return out, nil
	}
	n, err := lz4.UncompressBlock(src, dst[:cap(dst)])
	if err != nil {
		return nil, fmt.Errorf("LZ4 page is neither Hadoop-framed nor a bare LZ4 block: %w", err)
	}
	return dst[:n], nil
}

// decodeHadoopFrames decodes src as Hadoop LZ4 frames into buf; it reports false when src is not
// exactly a run of well-formed frames that fit buf.
func decodeHadoopFrames(buf, src []byte) ([]byte, bool) {
	n := 0
	for len(src) > 0 {
		if len(src) < 8 {
			return nil, false
		}
		raw, packed := binary.BigEndian.Uint32(src), binary.BigEndian.Uint32(src[4:])
		src = src[8:]
		if uint64(packed) > uint64(len(src)) || uint64(raw) > uint64(len(buf)-n) {
			return nil, false
		}
		got, err := lz4.UncompressBlock(src[:packed], buf[n:n+int(raw)])
		if err != nil || got != int(raw) {
			return nil, false
		}
		n += got
		src = src[packed:]
	}
	return buf[:n], true
}
