package sink_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(subprocessEnv); dir != "" {
		os.Exit(runSubprocessServer(dir))
	}
	goleak.VerifyTestMain(m)
}
