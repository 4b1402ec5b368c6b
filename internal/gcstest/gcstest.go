// Package gcstest runs fake-gcs-server (a GCS emulator, built into bin/ by `make test-emulators`)
// on loopback for tests, and points the GCS SDK at it.
package gcstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderproject/loader/internal/proctest"
)

// Bucket is the bucket the emulator serves the given objects from.
const Bucket = "data"

// Binary returns the fake-gcs-server binary: $LOADER_FAKE_GCS, or bin/fake-gcs-server in the module
// root. The test is skipped, saying how to build it, when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	return proctest.Binary(t, "LOADER_FAKE_GCS", "bin/fake-gcs-server", "run `make test-emulators`, which builds it")
}

// Start runs fake-gcs-server on a free loopback port, in memory, with bucket Bucket holding
// objects (key → content), until the test ends, and sets STORAGE_EMULATOR_HOST for the rest of the
// test so the GCS SDK (and the loader) reach it.
func Start(t *testing.T, objects map[string][]byte) {
	t.Helper()
	bin := Binary(t)
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, Bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range objects {
		p := filepath.Join(data, Bucket, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, v, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port), "-backend", "memory", "-data", data,
		"-public-host", fmt.Sprintf("127.0.0.1:%d", port), "-external-url", fmt.Sprintf("http://127.0.0.1:%d", port))
	proctest.Start(t, "fake-gcs-server", cmd, func(line string) (string, bool) {
		return "", strings.Contains(line, "server started")
	})
	t.Setenv("STORAGE_EMULATOR_HOST", fmt.Sprintf("127.0.0.1:%d", port))
}
