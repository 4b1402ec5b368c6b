// Command loader loads Parquet, CSV and Arrow IPC files into tables over Arrow Flight: Databricks
// Zerobus Ingest, any Flight SQL database with bulk ingest, a plain Flight DoPut server, or the
// embedded sink it ships with. Run `loader --help` for the commands and exit statuses.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	code := exitCode(ctx, err) // before stop(), which cancels ctx
	stop()
	switch {
	case err == nil || code == exitOK:
	case code == exitInterrupted && errors.Is(err, context.Canceled):
		// the cancellation's own text ("context canceled") says nothing to the user
		fmt.Fprintln(os.Stderr, "loader: interrupted; a load records what was acknowledged, and the same command resumes it")
	default:
		fmt.Fprintln(os.Stderr, "loader:", err)
	}
	os.Exit(code)
}
