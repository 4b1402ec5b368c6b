package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/telemetry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	defer http.DefaultClient.CloseIdleConnections()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func one(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no %s in /metrics", name)
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("no %s%v in /metrics", name, labels)
	return nil
}

// startScraped starts a provider serving /metrics on a free loopback port, shut down when the test ends.
func startScraped(t *testing.T) *telemetry.Provider {
	t.Helper()
	p, err := telemetry.Start(t.Context(), telemetry.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return p
}

func TestLoadAndSinkMetricsAreScraped(t *testing.T) {
	p := startScraped(t)
	pr := &load.Progress{}
	labels := map[string]string{"table": "main.default.t", "target": "grpc://x", "shard": "shard-1-of-3"}
	ev, err := p.ObserveLoad(pr, telemetry.LoadLabels{Table: "main.default.t", Target: "grpc://x", Shard: "shard-1-of-3"})
	if err != nil {
		t.Fatal(err)
	}
	pr.RowsRead.Store(120)
	pr.Rows.Store(100)
	pr.Bytes.Store(4096)
	pr.FilesTotal.Store(3)
	pr.FilesFailed.Store(1)
	pr.InFlight.Store(512)
	ev.CallOpened(0, false)
	ev.CallOpened(1, false)
	ev.CallClosed(1)
	ev.CallOpened(1, true)
	ev.Retry(1, io.ErrUnexpectedEOF)
	ev.AckLatency(150 * time.Millisecond)
	ev.AckLatency(2 * time.Second)

	sev, err := p.ObserveSink()
	if err != nil {
		t.Fatal(err)
	}
	tbl := tableschema.TableName{Catalog: "main", Schema: "default", Table: "t"}
	sev.StreamOpened()
	sev.Durable(tbl, 70, 1000)
	sev.Durable(tbl, 30, 500)
	sev.Committed(tbl, 100, 20*time.Millisecond)
	sev.WALSync(tbl, time.Millisecond)

	fams := scrape(t, p.Addr())
	for name, want := range map[string]float64{
		"loader_rows_read_total": 120, "loader_rows_acked_total": 100, "loader_bytes_acked_total": 4096,
		"loader_rows_quarantined_total": 0, "loader_retries_total": 1, "loader_stream_reconnects_total": 1,
	} {
		if got := one(t, fams, name, labels).GetCounter().GetValue(); got != want {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
	for name, want := range map[string]float64{"loader_inflight_bytes": 512, "loader_streams_open": 2} {
		if got := one(t, fams, name, labels).GetGauge().GetValue(); got != want {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
	if got := one(t, fams, "loader_files_total", map[string]string{"state": "failed"}).GetCounter().GetValue(); got != 1 {
		t.Errorf("loader_files_total{state=failed} = %v; want 1", got)
	}
	h := one(t, fams, "loader_ack_latency_seconds", labels).GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 2.15 {
		t.Errorf("loader_ack_latency_seconds: %d samples, sum %v; want 2, 2.15", h.GetSampleCount(), h.GetSampleSum())
	}
	tl := map[string]string{"table": "main.default.t"}
	if got := one(t, fams, "sink_rows_acked_total", tl).GetCounter().GetValue(); got != 100 {
		t.Errorf("sink_rows_acked_total = %v; want 100", got)
	}
	if got := one(t, fams, "sink_bytes_acked_total", tl).GetCounter().GetValue(); got != 1500 {
		t.Errorf("sink_bytes_acked_total = %v; want 1500", got)
	}
	if got := one(t, fams, "sink_commits_total", tl).GetCounter().GetValue(); got != 1 {
		t.Errorf("sink_commits_total = %v; want 1", got)
	}
	for _, name := range []string{"sink_commit_latency_seconds", "sink_wal_fsync_seconds"} {
		if got := one(t, fams, name, tl).GetHistogram().GetSampleCount(); got != 1 {
			t.Errorf("%s has %d samples; want 1", name, got)
		}
	}
	if got := one(t, fams, "sink_streams_open", nil).GetGauge().GetValue(); got != 1 {
		t.Errorf("sink_streams_open = %v; want 1", got)
	}
}

// TestOTLPPushAtShutdown receives the OTLP/HTTP export on a loopback collector.
func TestOTLPPushAtShutdown(t *testing.T) {
	got := make(chan *colmetric.ExportMetricsServiceRequest, 4)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &colmetric.ExportMetricsServiceRequest{}
		if err == nil && r.URL.Path == "/v1/metrics" && proto.Unmarshal(body, req) == nil {
			got <- req
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&colmetric.ExportMetricsServiceResponse{})
		_, _ = w.Write(b)
	})}
	go srv.Serve(lis)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000") // only the export at shutdown
	opts := telemetry.Options{}.FromEnv()
	if !opts.OTLP {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT set, but FromEnv did not turn OTLP on")
	}
	p, err := telemetry.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	pr := &load.Progress{}
	if _, err := p.ObserveLoad(pr, telemetry.LoadLabels{Table: "main.default.t", Target: "embedded", Shard: "none"}); err != nil {
		t.Fatal(err)
	}
	pr.Rows.Store(4242)
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var req *colmetric.ExportMetricsServiceRequest
	select {
	case req = <-got:
	default:
		t.Fatal("Shutdown returned without pushing metrics to the OTLP endpoint")
	}
	found := false
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if m.GetName() != "loader_rows_acked" {
					continue
				}
				for _, dp := range m.GetSum().GetDataPoints() {
					found = found || dp.GetAsInt() == 4242
				}
			}
		}
	}
	if !found {
		t.Errorf("the OTLP export has no loader_rows_acked = 4242: %v", req)
	}
}

// The object-store series equal the Store's own counts when scraped.
func TestObjectMetrics(t *testing.T) {
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "data")
	srv.Put(t, "data", "k", bytes.Repeat([]byte("x"), 5000))
	st := objstore.New()
	defer st.Close()
	p := startScraped(t)
	labels := map[string]string{"table": "main.default.t", "target": "embedded", "shard": "none"}
	if err := p.ObserveObjects(st, telemetry.LoadLabels{Table: "main.default.t", Target: "embedded", Shard: "none"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	loc, err := objstore.Parse("s3://data/k")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := st.Stat(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Open(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(make([]byte, 1000), 100); err != nil {
		t.Fatal(err)
	}
	requests, read := st.Stats()
	if requests < 2 || read != 1000 {
		t.Fatalf("store counted %d requests, %d bytes; want at least 2 and 1000", requests, read)
	}
	fams := scrape(t, p.Addr())
	for name, want := range map[string]int64{
		"loader_object_requests_total": requests, "loader_object_bytes_total": read, "loader_object_retries_total": 0,
	} {
		if got := one(t, fams, name, labels).GetCounter().GetValue(); got != float64(want) {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
}
