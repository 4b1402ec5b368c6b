package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// EnvOTLPEndpoint is the standard OpenTelemetry variable that turns the OTLP push on.
const EnvOTLPEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// Options configure a Provider.
type Options struct {
	// Addr is the HOST:PORT /metrics is served on; empty serves nothing (OTLP only, or no export).
	Addr string
	// OTLP pushes the metrics over OTLP/HTTP, configured by the standard OTEL_EXPORTER_OTLP_*
	// variables. Default: on when OTEL_EXPORTER_OTLP_ENDPOINT is set (see FromEnv).
	OTLP bool
	// Service is the service.name of the pushed metrics. Default "loader".
	Service string
}

// FromEnv returns o with OTLP turned on when OTEL_EXPORTER_OTLP_ENDPOINT is set.
func (o Options) FromEnv() Options {
	if v, ok := os.LookupEnv(EnvOTLPEndpoint); ok && v != "" {
		o.OTLP = true
	}
	return o
}

// Provider owns the meter provider, the Prometheus registry and the /metrics server.
type Provider struct {
	mp    *sdkmetric.MeterProvider
	meter metric.Meter
	reg   *prometheus.Registry
	srv   *http.Server
	lis   net.Listener
	done  chan error
}

// Start makes a Provider and, when o.Addr is set, starts serving /metrics on it (the listener is
// bound before Start returns, so Addr reports the port of ":0").
func Start(ctx context.Context, o Options) (*Provider, error) {
	if o.Service == "" {
		o.Service = "loader"
	}
	p := &Provider{reg: prometheus.NewRegistry()}
	exp, err := otelprom.New(otelprom.WithRegisterer(p.reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	opts := []sdkmetric.Option{
		sdkmetric.WithReader(exp),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", o.Service))),
		sdkmetric.WithView(latencyBuckets),
	}
	if o.OTLP {
		oexp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(oexp)))
	}
	p.mp = sdkmetric.NewMeterProvider(opts...)
	p.meter = p.mp.Meter("github.com/loaderproject/loader")
	if o.Addr != "" {
		lis, err := net.Listen("tcp", o.Addr)
		if err != nil {
			_ = p.mp.Shutdown(ctx)
			return nil, fmt.Errorf("telemetry: metrics address: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}))
		p.lis, p.done = lis, make(chan error, 1)
		p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { p.done <- p.srv.Serve(lis) }()
	}
	return p, nil
}

// latencyBuckets gives the latency histograms (unit s) buckets from 1 ms to a minute.
var latencyBuckets = sdkmetric.NewView(
	sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
	sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
		Boundaries: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}},
)

// Addr returns the address /metrics is served on, or "" when it is not served.
func (p *Provider) Addr() string {
	if p.lis == nil {
		return ""
	}
	return p.lis.Addr().String()
}

// Handler returns the Prometheus handler of the Provider's registry.
func (p *Provider) Handler() http.Handler { return promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}) }

// Shutdown pushes the last OTLP export (when OTLP is on) and stops the /metrics server.
func (p *Provider) Shutdown(ctx context.Context) error {
	err := p.mp.Shutdown(ctx)
	if p.srv != nil {
		if serr := p.srv.Shutdown(ctx); serr != nil {
			err = errors.Join(err, serr)
		}
		if serr := <-p.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}
	return err
}
