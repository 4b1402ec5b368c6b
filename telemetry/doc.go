// Package telemetry exposes what the loader and the embedded sink do as OpenTelemetry metrics,
// served to Prometheus on /metrics and, when OTEL_EXPORTER_OTLP_ENDPOINT is set, pushed over OTLP
// (HTTP/protobuf) every OTEL_METRIC_EXPORT_INTERVAL and once more at Shutdown, which suits short
// batch pods.
//
// A [Provider] owns a meter provider, its own Prometheus registry (never the global one) and the
// HTTP server. [Provider.ObserveLoad] instruments one load: counters and gauges that read the load's
// live *load.Progress when scraped, plus the flightclient.Events that feed the stream, retry and ack
// latency instruments; every series carries the labels table, target and shard. [Provider.ObserveSink]
// returns the sink.Events that feed the sink's instruments.
//
// Instrument names follow OpenTelemetry (no unit or _total suffix); the Prometheus exporter adds
// the suffixes, so loader_rows_read becomes loader_rows_read_total and loader_ack_latency (in
// seconds) loader_ack_latency_seconds.
//
// Concurrency: a Provider is safe for concurrent use; the Events it returns may be called from any
// goroutine.
package telemetry
