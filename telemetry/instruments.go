package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
)

// LoadLabels are the labels of every series of one load.
type LoadLabels struct {
	Table  string
	Target string
	Shard  string // "shard-K-of-N", or "none" for an unsharded load
}

// attrs is the labels as a measurement's attributes, extra ones after them.
func (l LoadLabels) attrs(extra ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{
		attribute.String("table", l.Table), attribute.String("target", l.Target), attribute.String("shard", l.Shard)}, extra...)...))
}

// counter registers an observable counter that reports read() with attrs when collected.
func (p *Provider) counter(name, desc string, attrs metric.MeasurementOption, read func() int64) error {
	_, err := p.meter.Int64ObservableCounter(name, metric.WithDescription(desc),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(read(), attrs)
			return nil
		}))
	return err
}

// ObserveLoad instruments one load. Counters and gauges read pr when collected, so they equal the
// load's summary at the end: loader_rows_read_total, loader_rows_acked_total,
// loader_bytes_acked_total, loader_rows_quarantined_total, loader_files_total{state="found"|"done"|
// "failed"}, loader_inflight_bytes. The returned Events feed loader_streams_open,
// loader_retries_total, loader_stream_reconnects_total and loader_ack_latency_seconds; pass them to
// the load's client (flightclient.WithEvents).
func (p *Provider) ObserveLoad(pr *load.Progress, l LoadLabels) (flightclient.Events, error) {
	m := p.meter
	attrs := l.attrs()
	errs := []error{
		p.counter("loader_rows_read", "Rows decoded from the sources (bad rows quarantined included).", attrs, pr.RowsRead.Load),
		p.counter("loader_rows_acked", "Rows the target acknowledged as durable.", attrs, pr.Rows.Load),
		p.counter("loader_bytes_acked", "Arrow IPC frame bytes the target acknowledged.", attrs, pr.Bytes.Load),
		p.counter("loader_rows_quarantined", "Bad rows written to the dead-letter files.", attrs, pr.Quarantined.Load),
	}
	states := []struct {
		state string
		read  func() int64
	}{{"found", pr.FilesTotal.Load}, {"done", pr.FilesDone.Load}, {"failed", pr.FilesFailed.Load}}
	_, err := m.Int64ObservableCounter("loader_files", metric.WithDescription("Files of the load by state: found, done (read to the end or stopped), failed."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, s := range states {
				o.Observe(s.read(), l.attrs(attribute.String("state", s.state)))
			}
			return nil
		}))
	errs = append(errs, err)
	_, err = m.Int64ObservableGauge("loader_inflight_bytes", metric.WithDescription("Frame bytes sent and not yet acknowledged."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(pr.InFlight.Load(), attrs)
			return nil
		}))
	errs = append(errs, err)
	streams, err := m.Int64UpDownCounter("loader_streams_open", metric.WithDescription("DoPut streams open now."))
	errs = append(errs, err)
	retries, err := m.Int64Counter("loader_retries", metric.WithDescription("Streams reopened after a transient failure."))
	errs = append(errs, err)
	reconnects, err := m.Int64Counter("loader_stream_reconnects", metric.WithDescription("DoPuts opened after a stream's first (retries, rotations, bounded calls)."))
	errs = append(errs, err)
	latency, err := m.Float64Histogram("loader_ack_latency", metric.WithUnit("s"), metric.WithDescription("Time from sending a frame to its acknowledgement."))
	errs = append(errs, err)
	for _, e := range errs {
		if e != nil {
			return flightclient.Events{}, fmt.Errorf("telemetry: %w", e)
		}
	}
	ctx := context.Background()
	// The counters start at zero, so they are scraped before the first event.
	streams.Add(ctx, 0, attrs)
	retries.Add(ctx, 0, attrs)
	reconnects.Add(ctx, 0, attrs)
	return flightclient.Events{
		CallOpened: func(_ int, reconnect bool) {
			streams.Add(ctx, 1, attrs)
			if reconnect {
				reconnects.Add(ctx, 1, attrs)
			}
		},
		CallClosed: func(int) { streams.Add(ctx, -1, attrs) },
		Retry:      func(int, error) { retries.Add(ctx, 1, attrs) },
		AckLatency: func(d time.Duration) { latency.Record(ctx, d.Seconds(), attrs) },
	}, nil
}

// ObserveObjects instruments the object store a load reads through (object-store sources, a
// manifest in a bucket): loader_object_requests_total (GETs, HEADs, list pages and PUTs sent, the
// SDKs' own retries not counted), loader_object_bytes_total (object bytes read) and
// loader_object_retries_total (GETs sent again after a response broke off or stalled), read from
// st when collected.
func (p *Provider) ObserveObjects(st *objstore.Store, l LoadLabels) error {
	attrs := l.attrs()
	if err := errors.Join(
		p.counter("loader_object_requests", "Requests sent to object stores (GETs, HEADs, list pages, PUTs; the SDKs' own retries not counted).", attrs, func() int64 { r, _ := st.Stats(); return r }),
		p.counter("loader_object_bytes", "Object bytes read from object stores.", attrs, func() int64 { _, b := st.Stats(); return b }),
		p.counter("loader_object_retries", "GETs sent again after a response broke off or stalled.", attrs, st.Retries),
	); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	return nil
}

// ObserveSink returns the sink.Events that feed the embedded sink's instruments:
// sink_rows_acked_total{table}, sink_bytes_acked_total{table}, sink_commits_total{table},
// sink_commit_latency_seconds{table}, sink_wal_fsync_seconds{table} and sink_streams_open.
func (p *Provider) ObserveSink() (sink.Events, error) {
	m := p.meter
	rows, err1 := m.Int64Counter("sink_rows_acked", metric.WithDescription("Rows made durable and acknowledged."))
	bytes, err2 := m.Int64Counter("sink_bytes_acked", metric.WithDescription("Arrow IPC bytes made durable and acknowledged."))
	commits, err3 := m.Int64Counter("sink_commits", metric.WithDescription("Delta commits."))
	commitLatency, err4 := m.Float64Histogram("sink_commit_latency", metric.WithUnit("s"), metric.WithDescription("Duration of a Delta commit."))
	fsync, err5 := m.Float64Histogram("sink_wal_fsync", metric.WithUnit("s"), metric.WithDescription("Duration of a write-ahead log group commit's fsync."))
	streams, err6 := m.Int64UpDownCounter("sink_streams_open", metric.WithDescription("DoPut streams open now."))
	for _, e := range []error{err1, err2, err3, err4, err5, err6} {
		if e != nil {
			return sink.Events{}, fmt.Errorf("telemetry: %w", e)
		}
	}
	ctx := context.Background()
	streams.Add(ctx, 0)
	table := func(t tableschema.TableName) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("table", t.String())))
	}
	return sink.Events{
		Durable: func(t tableschema.TableName, r, b int64) {
			rows.Add(ctx, r, table(t))
			bytes.Add(ctx, b, table(t))
		},
		Committed: func(t tableschema.TableName, _ int64, d time.Duration) {
			commits.Add(ctx, 1, table(t))
			commitLatency.Record(ctx, d.Seconds(), table(t))
		},
		WALSync:      func(t tableschema.TableName, d time.Duration) { fsync.Record(ctx, d.Seconds(), table(t)) },
		StreamOpened: func() { streams.Add(ctx, 1) },
		StreamClosed: func() { streams.Add(ctx, -1) },
	}, nil
}
