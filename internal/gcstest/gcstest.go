// Package gcstest runs fake-gcs-server (a GCS emulator, built into bin/ by `make test-emulators`)
// on loopback for tests, and points the GCS SDK at it.
package gcstest

import (
	"fmt"
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
	writeObjects(t, data, objects)
	port := proctest.FreePort(t)
	start(t, bin, data, port, fmt.Sprintf("127.0.0.1:%d", port))
}

// StartOn is Start on the given loopback port, for clients that reach it at public (host:port, a
// proxy in front of it, say): the server routes requests by that host, and STORAGE_EMULATOR_HOST
// is set to it.
func StartOn(t *testing.T, objects map[string][]byte, port int, public string) {
	t.Helper()
	bin := Binary(t)
	data := t.TempDir()
	writeObjects(t, data, objects)
	start(t, bin, data, port, public)
}

func start(t *testing.T, bin, data string, port int, public string) {
	t.Helper()
	cmd := exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port), "-backend", "memory", "-data", data,
		"-public-host", public, "-external-url", "http://"+public)
	proctest.Start(t, "fake-gcs-server", cmd, func(line string) (string, bool) {
		return "", strings.Contains(line, "server started")
	})
	t.Setenv("STORAGE_EMULATOR_HOST", public)
}

// writeObjects writes objects into bucket Bucket of a data directory.
func writeObjects(t *testing.T, data string, objects map[string][]byte) {
	t.Helper()
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
}
