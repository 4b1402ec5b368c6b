package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
)

// maxPrefixBytes bounds the frames encoded ahead of time for the transport and sink ceilings: a
// bigger dataset is represented by its first maxPrefixBytes, sent again and again.
const maxPrefixBytes = 256 << 20

// prefix is the start of the dataset, decoded, cast and encoded into frames ahead of time. Its frames
// each hold their body in one slice of their own and nothing else, so they are sent any number of
// times: Load's Release of them does nothing.
type prefix struct {
	enc      *partitioner.Encoder
	frames   []*partitioner.Frame
	bytes    int64
	rows     int64
	complete bool // the frames hold the whole dataset
}

var errPrefixFull = errors.New("prefix full")

// encodePrefix decodes the dataset with load.Decode (the load's own read, match and cast) and encodes
// its batches as a load does (cfg's frame limit and compression), keeping frames until limit bytes.
func encodePrefix(ctx context.Context, cfg load.Config, schema *tableschema.Schema, limit int64) (*prefix, error) {
	enc, err := partitioner.NewEncoder(schema.Arrow(), cfg.MaxFrameBytes, partitioner.WithCompression(cfg.Compression))
	if err != nil {
		return nil, err
	}
	p := &prefix{enc: enc}
	var mu sync.Mutex
	_, err = load.Decode(ctx, cfg, func(rec arrow.RecordBatch) error {
		return enc.Encode(rec, partitioner.Span{}, func(f *partitioner.Frame) error {
			mu.Lock()
			defer mu.Unlock()
			if p.bytes+int64(f.Size()) > limit && len(p.frames) > 0 {
				f.Release()
				return errPrefixFull
			}
			// Kept as one slice of its own: a frame from the encoder holds its whole batch, rounded up
			// to the buffer pool's sizes, which for a prefix of hundreds of MB is memory that a load,
			// releasing each batch as its frames are acknowledged, never holds at once.
			c := &partitioner.Frame{Header: f.Header, Body: f.AppendBody(nil), Rows: f.Rows, Span: f.Span}
			f.Release()
			p.frames = append(p.frames, c)
			p.bytes += int64(c.Size())
			p.rows += c.Rows
			return nil
		})
	})
	if err != nil && !errors.Is(err, errPrefixFull) {
		return nil, err
	}
	p.complete = err == nil
	if len(p.frames) == 0 {
		return nil, errors.New("the dataset encodes to no frames")
	}
	return p, nil
}

// sendPrefix sends the prefix's frames over streams DoPuts on conns connections with flightclient's
// Client.Load: the loader's own transport with nothing to decode. A complete prefix is sent once; a
// partial one round and round until total bytes went out. It returns the rows and bytes
// acknowledged.
func sendPrefix(ctx context.Context, p *prefix, endpoint string, dialect flightclient.Dialect, table tableschema.TableName,
	total int64, streams, conns int, opts ...flightclient.Option) (rows, bytes int64, err error) {
	client, err := flightclient.New(endpoint, dialect, append([]flightclient.Option{
		flightclient.WithConnections(conns), flightclient.WithMaxFrameBytes(p.enc.MaxFrameBytes())}, opts...)...)
	if err != nil {
		return 0, 0, err
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	frames := make(chan *partitioner.Frame, streams)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer close(frames)
		if p.complete {
			total = p.bytes
		}
		// Bounded: every pass over the prefix sends p.bytes > 0.
		for sent := int64(0); sent < total; {
			for _, f := range p.frames {
				if sent >= total {
					return
				}
				select {
				case frames <- f:
					sent += int64(f.Size())
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	stats, err := client.Load(ctx, table, p.enc.Schema(), p.enc, streams, frames, nil)
	cancel()
	<-fed
	if err != nil {
		return stats.Rows, stats.Bytes, fmt.Errorf("send the encoded frames: %w", err)
	}
	return stats.Rows, stats.Bytes, nil
}
