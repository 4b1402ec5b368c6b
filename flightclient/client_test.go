package flightclient_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/sinkapi"
)

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in      string
		addr    string
		tls     bool
		wantErr string
	}{
		{"grpc://127.0.0.1:7070", "127.0.0.1:7070", false, ""},
		{"grpc://localhost:1", "localhost:1", false, ""},
		{"grpc+tls://example.com:8443", "example.com:8443", true, ""},
		{"grpc+tls://example.com", "example.com:443", true, ""},
		{"https://1234.zerobus.us-west-2.cloud.databricks.com", "1234.zerobus.us-west-2.cloud.databricks.com:443", true, ""},
		{"https://h:9443/", "h:9443", true, ""},
		{"h.example.com", "h.example.com:443", true, ""},
		{"h.example.com:8443", "h.example.com:8443", true, ""},
		{"grpc://[::1]:7070", "[::1]:7070", false, ""},
		{"GRPC://h:1", "h:1", false, ""},
		{"", "", false, "empty"},
		{"grpc://h", "", false, "needs a port"},
		{"http://h:80", "", false, "scheme"},
		{"grpc://h:0", "", false, "port"},
		{"grpc://h:99999", "", false, "port"},
		{"https://h/path", "", false, "only a scheme"},
		{"https://user@h", "", false, "only a scheme"},
		{"https://h?x=1", "", false, "only a scheme"},
		{"grpc://:7070", "", false, "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ep, err := flightclient.ParseEndpoint(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseEndpoint(%q) = %+v, %v; want an error containing %q", tt.in, ep, err, tt.wantErr)
				}
				return
			}
			if err != nil || ep.Address != tt.addr || ep.TLS != tt.tls {
				t.Errorf("ParseEndpoint(%q) = %+v, %v; want address %s, TLS %t", tt.in, ep, err, tt.addr, tt.tls)
			}
		})
	}
}

func TestNewDoesNoIO(t *testing.T) {
	// Nothing listens there; New must still succeed.
	c, err := flightclient.New("grpc://127.0.0.1:1", flightclient.Zerobus, flightclient.WithConnections(3))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if _, err := flightclient.New("grpc://127.0.0.1:1", "kafka"); err == nil {
		t.Error("New(unknown dialect) = nil error")
	}
	if _, err := flightclient.New("ftp://h", flightclient.Zerobus); err == nil {
		t.Error("New(bad endpoint) = nil error")
	}
}

// actionServer answers the sink's custom actions.
type actionServer struct {
	flight.BaseFlightServer
	token string
}

func (s *actionServer) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	if !slices.Equal(md.Get("authorization"), []string{"Bearer " + s.token}) {
		return status.Error(codes.Unauthenticated, "token")
	}
	if string(a.Body) != tableName.String() {
		return status.Errorf(codes.NotFound, "no table %q", a.Body)
	}
	var body any
	switch a.Type {
	case sinkapi.ActionFlush:
		body = sinkapi.CountResult{Table: tableName.String(), Committed: 1234, Acknowledged: 0, Version: 7}
	case sinkapi.ActionCount:
		body = sinkapi.CountResult{Table: tableName.String(), Committed: 1000, Acknowledged: 234, Version: 6}
	case sinkapi.ActionDescribe:
		body = sinkapi.TableInfo{Table: tableName.String(), ID: "tbl-id", Columns: tableCols.SQL()}
	default:
		return status.Error(codes.Unimplemented, a.Type)
	}
	b, _ := json.Marshal(body)
	return stream.Send(&flight.Result{Body: b})
}

// TestCountAndDescribe: the Zerobus and Flight dialects count and describe with the sink's actions.
func TestCountAndDescribe(t *testing.T) {
	addr := serve(t, &actionServer{token: "tok"})
	for _, dialect := range []flightclient.Dialect{flightclient.Zerobus, flightclient.Flight} {
		t.Run(string(dialect), func(t *testing.T) {
			c := testClient(t, "grpc://"+addr, dialect, flightclient.WithToken("tok"))
			n, err := c.Count(t.Context(), tableName)
			if err != nil || n != 1234 {
				t.Errorf("Count() = %d, %v; want 1234", n, err)
			}
			counts, err := c.Counts(t.Context(), tableName)
			if err != nil || counts != (flightclient.RowCounts{Committed: 1000, Acknowledged: 234}) {
				t.Errorf("Counts() = %+v, %v; want 1000 committed, 234 acknowledged", counts, err)
			}
			info, err := c.Describe(t.Context(), tableName)
			if err != nil {
				t.Fatalf("Describe() = %v", err)
			}
			if info.ID != "tbl-id" || !info.Schema.Equal(tableCols) {
				t.Errorf("Describe() = %q, %s; want tbl-id, %s", info.ID, info.Schema.SQL(), tableCols.SQL())
			}
			other := tableName
			other.Table = "missing"
			if _, err := c.Count(t.Context(), other); status.Code(err) != codes.NotFound || !errors.Is(err, flightclient.ErrTableNotFound) ||
				!strings.Contains(err.Error(), "main.sales.missing") {
				t.Errorf("Count(missing) = %v; want ErrTableNotFound with the NotFound status, naming the table", err)
			}
			if err := c.Create(t.Context(), tableName, arrowSchema()); !errors.Is(err, flightclient.ErrUnsupported) {
				t.Errorf("Create() = %v; want ErrUnsupported", err)
			}
		})
	}
}

// TestCountUnsupported: a server that implements nothing but the bare Flight service cannot count,
// describe or create, in every dialect, and the error says why.
func TestCountUnsupported(t *testing.T) {
	addr := serve(t, &flight.BaseFlightServer{}) // answers every call Unimplemented
	for _, dialect := range []flightclient.Dialect{flightclient.Zerobus, flightclient.Flight, flightclient.FlightSQL} {
		t.Run(string(dialect), func(t *testing.T) {
			c := testClient(t, "grpc://"+addr, dialect)
			var ue *flightclient.UnsupportedError
			if _, err := c.Count(t.Context(), tableName); !errors.Is(err, flightclient.ErrUnsupported) || !errors.As(err, &ue) || ue.Why == "" {
				t.Errorf("Count() = %v; want an UnsupportedError with a reason", err)
			}
			if _, err := c.Counts(t.Context(), tableName); !errors.Is(err, flightclient.ErrUnsupported) {
				t.Errorf("Counts() = %v; want ErrUnsupported", err)
			}
			if _, err := c.Describe(t.Context(), tableName); !errors.Is(err, flightclient.ErrUnsupported) {
				t.Errorf("Describe() = %v; want ErrUnsupported", err)
			}
			if err := c.Create(t.Context(), tableName, arrowSchema()); !errors.Is(err, flightclient.ErrUnsupported) {
				t.Errorf("Create() = %v; want ErrUnsupported", err)
			}
		})
	}
}

func TestActionsPreCancelled(t *testing.T) {
	addr := serve(t, &actionServer{token: "tok"})
	c := testClient(t, "grpc://"+addr, flightclient.Zerobus, flightclient.WithToken("tok"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Count(ctx, tableName); !errors.Is(err, context.Canceled) {
		t.Errorf("Count(cancelled) = %v; want context.Canceled", err)
	}
	if _, err := c.Describe(ctx, tableName); !errors.Is(err, context.Canceled) {
		t.Errorf("Describe(cancelled) = %v; want context.Canceled", err)
	}
}

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "loader test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	mem := checked(t)
	srv := newServer(t, mem)
	addr := srv.start(t, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	fx := newFixture(t, mem, 500, 4<<10)

	c := testClient(t, "grpc+tls://"+addr, flightclient.Zerobus, flightclient.WithTLSConfig(&tls.Config{RootCAs: pool}))
	loadAll(t.Context(), t, c, fx, 2)
	srv.checkDurable(t, fx.rows)

	// The system roots do not trust the test certificate.
	untrusting := testClient(t, "grpc+tls://"+addr, flightclient.Zerobus, flightclient.WithRetry(0, time.Millisecond, time.Millisecond))
	if _, _, err := load(t.Context(), t, untrusting, fx, 1); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Load() with untrusted certificate = %v; want a certificate error", err)
	}
}

func TestNewFromConn(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	addr := srv.start(t)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c, err := flightclient.NewFromConn(cc, flightclient.Zerobus)
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, mem, 300, 4<<10)
	loadAll(t.Context(), t, c, fx, 2)
	srv.checkDurable(t, fx.rows)
	if err := c.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	// The caller's connection stays usable.
	if st := cc.GetState(); st == connectivity.Shutdown {
		t.Errorf("after Client.Close the caller's connection is %s; want it left open", st)
	}
	if _, err := flightclient.NewFromConn(nil, flightclient.Zerobus); err == nil {
		t.Error("NewFromConn(nil) = nil error")
	}
}

// TestMessageLimits sends frames larger than gRPC's default limits: the client's send limit follows
// WithMaxFrameBytes.
func TestMessageLimits(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.start(t, grpc.MaxRecvMsgSize(32<<20))
	const limit = 6 << 20
	fx := newFixture(t, mem, 200_000, limit)
	if fx.frames[0].Size() <= 4<<20 {
		t.Fatalf("frames of %d bytes; the test needs frames over 4 MiB", fx.frames[0].Size())
	}
	small := testClient(t, srv.endpoint(), flightclient.Zerobus, flightclient.WithRetry(0, time.Millisecond, time.Millisecond))
	if _, _, err := load(t.Context(), t, small, fx, 1); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Load() of %d-byte frames with the default limit = %v; want ResourceExhausted", fx.frames[0].Size(), err)
	}
	big := testClient(t, srv.endpoint(), flightclient.Zerobus, flightclient.WithMaxFrameBytes(limit))
	loadAll(t.Context(), t, big, fx, 1)
	srv.checkDurable(t, fx.rows)
}
