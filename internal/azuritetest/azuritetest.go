package azuritetest

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/loaderproject/loader/internal/proctest"
)

// The emulator's well-known development account (published in Azurite's documentation; it only
// works against the emulator).
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Server is a running azurite-blob.
type Server struct {
	Host   string // 127.0.0.1:port
	client *azblob.Client
}

// Binary returns the azurite-blob launcher: $LOADER_AZURITE, or bin/azurite/node_modules/.bin/azurite-blob
// in the module root. The test is skipped, saying how to install it, when it or node is missing.
func Binary(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("azurite: node is not installed (Azurite is an npm package)")
	}
	return proctest.Binary(t, "LOADER_AZURITE", "bin/azurite/node_modules/.bin/azurite-blob",
		"run `make test-emulators`, which installs Azurite with npm")
}

var listening = regexp.MustCompile(`listens on http://(127\.0\.0\.1:\d+)`)

// Start runs azurite-blob on a free loopback port, keeping its data in a temporary directory, until
// the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", "0", "--location", t.TempDir(),
		"--disableTelemetry", "--skipApiVersionCheck", "--silent")
	s := &Server{Host: proctest.Start(t, "azurite", cmd, func(line string) (string, bool) {
		if m := listening.FindStringSubmatch(line); m != nil {
			return m[1], true
		}
		return "", false
	})}
	cred, err := azblob.NewSharedKeyCredential(Account, Key)
	if err != nil {
		t.Fatal(err)
	}
	if s.client, err = azblob.NewClientWithSharedKeyCredential(s.ServiceURL(), cred, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// ServiceURL is the account's blob service URL.
func (s *Server) ServiceURL() string { return "http://" + s.Host + "/" + Account }

// Env sets the environment gocloud's azureblob (and so the loader) reads to reach the emulator as
// the development account, for the rest of the test.
func (s *Server) Env(t *testing.T) {
	t.Helper()
	t.Setenv("AZURE_STORAGE_ACCOUNT", Account)
	t.Setenv("AZURE_STORAGE_KEY", Key)
	t.Setenv("AZURE_STORAGE_DOMAIN", s.Host)
	t.Setenv("AZURE_STORAGE_PROTOCOL", "http")
	t.Setenv("AZURE_STORAGE_IS_LOCAL_EMULATOR", "true")
	for _, v := range []string{"AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING"} {
		t.Setenv(v, "")
	}
}

// CreateContainer creates a container.
func (s *Server) CreateContainer(t testing.TB, name string) {
	t.Helper()
	if _, err := s.client.CreateContainer(context.Background(), name, nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
}

// Put writes a blob and returns its ETag.
func (s *Server) Put(t testing.TB, container, key string, data []byte) string {
	t.Helper()
	resp, err := s.client.UploadBuffer(context.Background(), container, key, data, nil)
	if err != nil {
		t.Fatalf("put azblob://%s/%s: %v", container, key, err)
	}
	return string(*resp.ETag)
}

// PutFile writes the file at path as a blob and returns its ETag.
func (s *Server) PutFile(t testing.TB, container, key, path string) (etag string) {
	t.Helper()
	proctest.PutFile(t, path, func(data []byte) { etag = s.Put(t, container, key, data) })
	return etag
}

// PutDir writes every regular file under dir as a blob under prefix (its path below dir, with
// slashes).
func (s *Server) PutDir(t testing.TB, container, prefix, dir string) {
	t.Helper()
	proctest.PutDir(t, prefix, dir, func(key string, data []byte) { s.Put(t, container, key, data) })
}

// ETag returns a blob's current ETag.
func (s *Server) ETag(t testing.TB, container, key string) string {
	t.Helper()
	p, err := s.client.ServiceClient().NewContainerClient(container).NewBlobClient(key).GetProperties(context.Background(), nil)
	if err != nil {
		t.Fatalf("properties of azblob://%s/%s: %v", container, key, err)
	}
	return string(*p.ETag)
}

// String describes the server, for test logs.
func (s *Server) String() string { return fmt.Sprintf("azurite at %s", s.Host) }
