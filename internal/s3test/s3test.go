package s3test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/loaderproject/loader/internal/proctest"
)

// Version is the versitygw release the tests run.
const Version = "v1.8.0"

// The root account's keys. Test-only; the server listens on loopback.
const (
	AccessKey = "loadertestroot"
	SecretKey = "loadertestrootsecret"
)

// Server is a running versitygw.
type Server struct {
	Endpoint string // http://127.0.0.1:port
	Root     string // the posix backend's directory: one subdirectory per bucket
	Region   string
	bin      string
	client   *s3.Client
}

// Binary returns the versitygw binary: $LOADER_VERSITYGW, or bin/versitygw in the module root. The
// test is skipped, saying how to build it, when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	return proctest.Binary(t, "LOADER_VERSITYGW", "bin/versitygw",
		"versitygw "+Version+" is not built: run `make versitygw`, which `make test` does first")
}

// Start runs versitygw on a free loopback port until the test ends. Its region is us-east-1.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartIn(t, "us-east-1")
}

// StartIn runs versitygw in the given region: it refuses requests signed for another one, with a
// 400 AuthorizationHeaderMalformed that names its region.
func StartIn(t testing.TB, region string) *Server {
	t.Helper()
	bin := Binary(t)
	root := t.TempDir()
	iam := t.TempDir()
	port := proctest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "--iam-dir", iam,
		"--region", region, "posix", root)
	proctest.Start(t, "versitygw", cmd, func(line string) (string, bool) {
		return "", strings.Contains(line, "http://"+addr)
	})
	s := &Server{Endpoint: "http://" + addr, Root: root, Region: region, bin: bin}
	s.client = s.Client(AccessKey, SecretKey)
	return s
}

// Client is an S3 client of the server with the given keys.
func (s *Server) Client(access, secret string) *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
	})
}

// Env sets the environment a loader needs to reach the server as the given account (the SDK's
// standard variables), for the rest of the test.
func (s *Server) Env(t *testing.T, access, secret string) {
	t.Helper()
	EnvFor(t, s.Endpoint, access, secret)
}

// EnvFor sets the environment a loader needs to reach the S3 endpoint (http://host:port) with the
// given keys, for the rest of the test.
func EnvFor(t *testing.T, endpoint, access, secret string) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL_S3", endpoint)
	t.Setenv("AWS_ENDPOINT_URL", "")
}

// CreateBucket creates a bucket owned by the root account.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	if _, err := s.client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Put writes an object and returns its ETag.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) string {
	t.Helper()
	out, err := s.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
	return aws.ToString(out.ETag)
}

// PutFile uploads a local file.
func (s *Server) PutFile(t testing.TB, bucket, key, path string) (etag string) {
	t.Helper()
	proctest.PutFile(t, path, func(data []byte) { etag = s.Put(t, bucket, key, data) })
	return etag
}

// PutDir uploads every file below dir under prefix (keys use '/').
func (s *Server) PutDir(t testing.TB, bucket, prefix, dir string) {
	t.Helper()
	proctest.PutDir(t, prefix, dir, func(key string, data []byte) { s.Put(t, bucket, key, data) })
}

// AddUser creates an account with the "user" role, which may not read the root account's buckets.
func (s *Server) AddUser(t testing.TB, access, secret string) {
	t.Helper()
	out, err := exec.Command(s.bin, "admin", "--access", AccessKey, "--secret", SecretKey, "--endpoint-url", s.Endpoint,
		"create-user", "--access", access, "--secret", secret, "--role", "user").CombinedOutput()
	if err != nil {
		t.Fatalf("versitygw admin create-user: %v\n%s", err, out)
	}
}

// Delete removes an object.
func (s *Server) Delete(t testing.TB, bucket, key string) {
	t.Helper()
	if _, err := s.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		t.Fatalf("delete s3://%s/%s: %v", bucket, key, err)
	}
}
