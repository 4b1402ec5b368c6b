package objstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loaderproject/loader/objstore"
)

// startFakeGCS runs fake-gcs-server (`make test-emulators` builds it into bin/) on loopback with
// bucket "data" holding files, and points the GCS SDK at it (STORAGE_EMULATOR_HOST). The test is
// skipped when the binary is not there.
func startFakeGCS(t *testing.T, files map[string][]byte) {
	t.Helper()
	bin := os.Getenv("LOADER_FAKE_GCS")
	if bin == "" {
		bin = filepath.Join("..", "bin", "fake-gcs-server")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("fake-gcs-server is not built (%s): run `make test-emulators`", bin)
	}
	data := t.TempDir()
	for k, v := range files {
		p := filepath.Join(data, "data", filepath.FromSlash(k))
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
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	ready := make(chan bool, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "server started") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
		_ = cmd.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("fake-gcs-server exited before it started")
		}
	case <-time.After(time.Minute):
		t.Fatal("fake-gcs-server did not start within a minute")
	}
	t.Setenv("STORAGE_EMULATOR_HOST", fmt.Sprintf("127.0.0.1:%d", port))
}

func TestGCSEmulator(t *testing.T) {
	data := pattern(200 << 10)
	startFakeGCS(t, map[string][]byte{"t/a.bin": data, "t/_SUCCESS": nil, "t/year=2024/b.bin": []byte("bee")})
	st := objstore.New()
	defer func() { _ = st.Close() }()
	ctx := context.Background()
	var keys []string
	err := st.Walk(ctx, mustParse(t, "gs://data/t/"), nil, func(o objstore.Object) error {
		keys = append(keys, o.Loc.Key)
		if o.ETag == "" {
			t.Errorf("%s listed without a generation", o.URL())
		}
		return nil
	})
	if err != nil || strings.Join(keys, " ") != "t/_SUCCESS t/a.bin t/year=2024/b.bin" {
		t.Fatalf("walk: %v, %v", keys, err)
	}
	obj, err := st.Stat(ctx, mustParse(t, "gs://data/t/a.bin"))
	if err != nil || obj.Size != int64(len(data)) || !strings.HasPrefix(obj.ETag, "g") {
		t.Fatalf("stat: %+v, %v", obj, err)
	}
	r, _ := st.Open(ctx, obj)
	tail, err := r.ReadTail(ctx, 100)
	if err != nil || !bytes.Equal(tail, data[len(data)-100:]) {
		t.Errorf("tail: %v", err)
	}
	pf, err := r.Prefetch(ctx, []objstore.Range{{Off: 10, Len: 1000}, {Off: 1010, Len: 10}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 1010)
	if _, err := pf.ReadAt(got, 10); err != nil || !bytes.Equal(got, data[10:1020]) {
		t.Errorf("prefetched read: %v", err)
	}
	if _, err := st.Stat(ctx, mustParse(t, "gs://data/t/missing")); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("missing object: %v; want ErrNotFound", err)
	}
	// Conditional writes (generation match), and a read of the old generation after a rewrite.
	if _, err := st.Create(ctx, obj.Loc, []byte("x")); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Create over an object: %v; want ErrPrecondition", err)
	}
	if _, err := st.Update(ctx, obj.Loc, []byte("new"), obj.ETag); err != nil {
		t.Fatalf("Update with the current generation: %v", err)
	}
	if _, err := st.Update(ctx, obj.Loc, []byte("newer"), obj.ETag); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Update with a stale generation: %v; want ErrPrecondition", err)
	}
	if _, err := r.ReadAt(make([]byte, 10), 0); !errors.Is(err, objstore.ErrChanged) {
		t.Errorf("reading the old generation: %v; want ErrChanged", err)
	}
}
