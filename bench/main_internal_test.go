package bench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// fakeSinkEnv makes the test binary act as a `loader serve` when it is started as one (startSink
// runs "BINARY serve ..."): "ok" prints its address and waits for SIGTERM, "fail" exits at once.
const fakeSinkEnv = "BENCH_TEST_FAKE_SINK"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeSinkEnv) {
	case "":
		goleak.VerifyTestMain(m)
	case "ok":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		fmt.Fprintln(os.Stderr, "WARNING: a line before the address")
		fmt.Fprintln(os.Stderr, "listening on 127.0.0.1:4242")
		<-ctx.Done()
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "loader: unknown flag: --stream-rate-limit")
		os.Exit(2)
	}
}
