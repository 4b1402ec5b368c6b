package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/telemetry"
)

// metricsFlags serve Prometheus /metrics and push OTLP (OTEL_EXPORTER_OTLP_ENDPOINT).
type metricsFlags struct {
	addr   string
	linger time.Duration
}

func (f *metricsFlags) register(fl *pflag.FlagSet, linger bool) {
	fl.StringVar(&f.addr, "metrics-addr", "", "serve Prometheus metrics on http://HOST:PORT/metrics (port 0 picks a free port); with $"+telemetry.EnvOTLPEndpoint+" set, metrics are also pushed over OTLP/HTTP")
	if linger {
		fl.DurationVar(&f.linger, "metrics-linger", 0, "keep serving /metrics this long after the load ends, so a short pod's last values are scraped")
	}
}

// start starts the metrics provider when the flags or the environment ask for one; nil otherwise.
// The address /metrics is served on is printed on stderr.
func (f *metricsFlags) start(ctx context.Context, a *app, service string) (*telemetry.Provider, error) {
	opts := telemetry.Options{Addr: f.addr, Service: service}.FromEnv()
	if opts.Addr == "" && !opts.OTLP {
		return nil, nil
	}
	p, err := telemetry.Start(ctx, opts)
	if err != nil {
		return nil, usageError{err}
	}
	return p, nil
}

// announce says where /metrics is served, once the caller has registered its instruments, so a
// scrape after this line finds every series.
func (f *metricsFlags) announce(a *app, p *telemetry.Provider) {
	if p != nil && p.Addr() != "" {
		fmt.Fprintf(a.stderr, "metrics on http://%s/metrics\n", p.Addr())
	}
}

// stop keeps /metrics up for linger (or until ctx ends), then pushes the last OTLP export and stops.
func (f *metricsFlags) stop(ctx context.Context, a *app, p *telemetry.Provider) {
	if p == nil {
		return
	}
	if f.linger > 0 && p.Addr() != "" {
		fmt.Fprintf(a.stderr, "serving metrics on http://%s/metrics for %s more (SIGTERM ends it)\n", p.Addr(), f.linger)
		t := time.NewTimer(f.linger)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil {
		a.logger.Warn("metrics shutdown", "err", err)
	}
}

// metricLabels are the labels of a load's series: its table, target (the endpoint, or "embedded")
// and shard ("none" when unsharded).
func metricLabels(cfg *load.Config) telemetry.LoadLabels {
	l := telemetry.LoadLabels{Table: cfg.Table.String(), Target: cfg.Endpoint, Shard: "none"}
	if l.Target == "" {
		l.Target = "embedded"
	}
	if cfg.Shard != nil {
		l.Shard = cfg.Shard.Name()
	}
	return l
}
