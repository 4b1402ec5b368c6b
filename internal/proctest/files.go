package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Binary returns the program a test server runs: the path in the environment variable env when it is
// set, else rel (slash-separated) below the module root. The test is skipped, with hint, when the
// program is not there.
func Binary(t testing.TB, env, rel, hint string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s=%s: %v", env, p, err)
		}
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skipf("%s: the module root was not found above the test's directory", rel)
		}
		dir = parent
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not there: %s", p, hint)
	}
	return p
}

// PutFile stores the file at path with put.
func PutFile(t testing.TB, path string, put func(data []byte)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	put(data)
}

// PutDir stores every regular file below dir with put, under key prefix plus its slash-separated
// path below dir.
func PutDir(t testing.TB, prefix, dir string, put func(key string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		PutFile(t, p, func(data []byte) { put(prefix+filepath.ToSlash(rel), data) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BuildAndRun builds the Go main package pkg (a path as `go build` takes it) as the program name in
// a temporary directory, sets *bin to it, runs the tests and returns their exit code: a TestMain's
// body for tests that run the program itself. A build that fails is exit code 1, with go's output.
func BuildAndRun(m *testing.M, pkg, name string, bin *string) int {
	dir, err := os.MkdirTemp("", "loader-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	*bin = filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", *bin, pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building", pkg+":", err)
		return 1
	}
	return m.Run()
}
