package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/internal/gctune"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/warehouse"
)

type serveFlags struct {
	warehouse      string
	listen         string
	tokens         []string
	commitInterval time.Duration
	discard        bool
	shutdownWait   time.Duration
	streamRate     byteRate
	faults         sink.Faults
	oauth          serveOAuthFlags
	testFaults     bool
	unitIDs        bool
	metrics        metricsFlags
}

func (a *app) serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --warehouse DIR --listen HOST:PORT [--token T]... [--commit-interval D] [--discard]",
		Short: "Run the embedded sink: an Arrow Flight ingest server that writes Delta tables",
		Long: `Serve Arrow Flight over gRPC on --listen until SIGINT or SIGTERM, writing Delta tables under --warehouse.

The server speaks the Databricks Zerobus Arrow Flight protocol (DoPut with the
x-databricks-zerobus-table-name header), plain Flight DoPut with a PATH descriptor
[catalog, schema, table], and Flight SQL bulk ingest (CommandStatementIngest). DoGet with a ticket
holding a table name streams its committed rows.

Rows are acknowledged only once they are fsync'd in the table's write-ahead log, and committed to the
Delta table every --commit-interval. With port 0 a free port is chosen; when ready, the server prints
"listening on HOST:PORT" on stderr. On SIGINT or SIGTERM in-flight calls end cleanly and everything
acknowledged is committed.

--stream-rate-limit caps each DoPut at RATE bytes per second (e.g. 25MB/s), as Zerobus caps each
stream at 100 MB/s; with --fault-ack-delay (Zerobus acknowledges after about 150 ms) the sink stands
in for the service in benchmarks (loader bench --throttle).

--discard acknowledges without storing, to benchmark clients (loader bench). It still checks what a
stream's framing and the table's schema require: the table exists, the schema message matches its
columns, offsets increase, every frame is one well-formed IPC RecordBatch message whose arrays are
structurally sound (buffer sizes, lengths, offsets, null counts), and acknowledgements count the rows
received. It does NOT check values: UTF-8 of strings, DECIMAL text, NOT NULL columns (and Flight SQL
ingest does not cast). So data it accepts may still be refused by a durable sink or by Zerobus.

As a stand-in for a Databricks workspace and its Zerobus endpoint: --oauth-client ID:SECRET serves
the OIDC token endpoint (POST /oidc/v1/token, client credentials with Basic auth and
authorization_details) and the SQL Statement Execution API (SELECT count(*) FROM a table, over its
committed rows) over HTTP on the same address as Flight, gRPC and HTTP being told apart by content
type. Flight then accepts only the tokens it issued, each for the tables granted. --tls-cert and
--tls-key serve all of it over TLS. So DATABRICKS_WORKSPACE_URL and ZEROBUS_SERVER_ENDPOINT can
both point at it.

Faults for tests (off by default): --fault-drop-after, --fault-ack-delay, --fault-rotate-after,
--fault-unavailable, --fault-token-unavailable. --test-faults also serves the loader.faults action, with which any client that
passes authentication can inject faults into the running sink: never use it outside tests.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.warehouse, "warehouse", "warehouse", "directory holding the Delta tables")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8815", "address to serve on, HOST:PORT (port 0 picks a free port)")
	fl.StringArrayVar(&f.tokens, "token", nil, "accept only this bearer token (repeatable); without it every caller is accepted")
	fl.DurationVar(&f.commitInterval, "commit-interval", time.Second, "how often acknowledged rows are committed to Delta")
	fl.BoolVar(&f.discard, "discard", false, "acknowledge data without storing it, checking frames and structure but not values (client benchmarks only: NOTHING IS KEPT)")
	fl.DurationVar(&f.shutdownWait, "shutdown-timeout", 30*time.Second, "how long a shutdown waits for in-flight calls before cutting them off")
	fl.Var(&f.streamRate, "stream-rate-limit", "cap each DoPut at RATE bytes per second, e.g. 25MB/s (default: unlimited)")
	fl.BoolVar(&f.unitIDs, "unit-ids", true, "store each source unit range once, however often a loader sends it (false: at-least-once, like Zerobus)")
	fl.BoolVar(&f.testFaults, "test-faults", false, "serve the loader.faults action, so clients can inject faults (tests only)")
	f.metrics.register(fl, false)
	fl.IntVar(&f.faults.DropAfterFrames, "fault-drop-after", 0, "test fault: end each DoPut with Unavailable after N data frames")
	fl.IntVar(&f.faults.DropCalls, "fault-drop-calls", 0, "test fault: apply --fault-drop-after to the next N DoPuts only (0: all)")
	fl.DurationVar(&f.faults.AckDelay, "fault-ack-delay", 0, "test fault: hold every ack back this long")
	fl.IntVar(&f.faults.RotateAfterFrames, "fault-rotate-after", 0, "test fault: ask the client to rotate (close_stream_duration_ms) after N frames")
	fl.DurationVar(&f.faults.RotateGrace, "fault-rotate-grace", time.Second, "test fault: the grace period sent with a rotation")
	fl.IntVar(&f.faults.UnavailableCalls, "fault-unavailable", 0, "test fault: refuse the next N DoPut calls with Unavailable")
	f.oauth.register(fl)
	return cmd
}

func (a *app) serve(ctx context.Context, f serveFlags) error {
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return usagef("--listen %q: want HOST:PORT", f.listen)
	}
	wh, err := warehouse.Open(f.warehouse)
	if err != nil {
		return err
	}
	opts := []sink.Option{
		sink.WithLogger(a.logger),
		sink.WithCommitInterval(f.commitInterval),
		sink.WithDiscard(f.discard),
		sink.WithFaults(f.faults),
		sink.WithTestFaults(f.testFaults),
		sink.WithUnitIDs(f.unitIDs),
		sink.WithStreamRateLimit(int64(f.streamRate)),
	}
	if len(f.tokens) > 0 {
		opts = append(opts, sink.WithTokens(f.tokens...))
	}
	more, err := f.oauth.options()
	if err != nil {
		return err
	}
	opts = append(opts, more...)
	mp, err := f.metrics.start(ctx, a, "loader-sink")
	if err != nil {
		return err
	}
	defer f.metrics.stop(ctx, a, mp)
	if mp != nil {
		ev, err := mp.ObserveSink()
		if err != nil {
			return err
		}
		opts = append(opts, sink.WithEvents(ev))
	}
	f.metrics.announce(a, mp)
	if f.discard {
		fmt.Fprintln(a.stderr, "WARNING: --discard: every row is acknowledged and thrown away; NOTHING IS STORED. Use it only to benchmark clients.")
		restoreGC, _ := gctune.ForDiscardSink(os.LookupEnv)
		defer restoreGC()
	}
	lis, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	srv := sink.New(wh, opts...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case <-srv.Ready():
		fmt.Fprintf(a.stderr, "listening on %s\n", lis.Addr())
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.shutdownWait)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if serr := <-served; serr != nil && !errors.Is(serr, context.Canceled) {
		err = errors.Join(err, serr)
	}
	return err
}
