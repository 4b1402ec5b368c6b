package flightclient_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/testcert"
	"github.com/loaderproject/loader/tableschema"
)

// tableTokens is a TokenSource handing out scripted tokens per table and counting invalidations.
type tableTokens struct {
	mu          sync.Mutex
	next        []string // handed out one by one after each Invalidate; the last one stays
	tables      []tableschema.TableName
	invalidated int
}

func (s *tableTokens) Token(_ context.Context, table tableschema.TableName) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables = append(s.tables, table)
	return s.next[0], nil
}

func (s *tableTokens) Invalidate(tableschema.TableName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invalidated++
	if len(s.next) > 1 {
		s.next = s.next[1:]
	}
}

// TestLoadRemintsOnceOnUnauthenticated: a refused token is invalidated and the DoPut tried once
// more with a new one; a second refusal fails the load.
func TestLoadRemintsOnceOnUnauthenticated(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tokens    []string
		wantCode  codes.Code
		wantCalls int
	}{
		{"a new token works", []string{"stale", "good"}, codes.OK, 2},
		{"the new token is refused too", []string{"stale", "also-bad"}, codes.Unauthenticated, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checked(t)
			srv := newServer(t, mem)
			srv.token = "good"
			srv.start(t)
			fx := newFixture(t, mem, 10, 1<<20)
			ts := &tableTokens{next: tc.tokens}
			c := testClient(t, srv.endpoint(), flightclient.Zerobus, flightclient.WithTableTokens(ts))
			_, _, err := load(t.Context(), t, c, fx, 1)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("Load() = %v; want %v", err, tc.wantCode)
			}
			if ts.invalidated != 1 || srv.callCount() != tc.wantCalls {
				t.Errorf("%d invalidations, %d calls; want 1 and %d", ts.invalidated, srv.callCount(), tc.wantCalls)
			}
			for _, tb := range ts.tables {
				if tb != tableName {
					t.Errorf("token asked for %s; want %s", tb, tableName)
				}
			}
		})
	}
}

// TestTLSVerificationIsFatal: a server certificate from an unknown CA stops the load at once with a
// *TLSError, where other connection failures would be retried; with the CA trusted the handshake
// succeeds.
func TestTLSVerificationIsFatal(t *testing.T) {
	certs, err := testcert.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := certs.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsLis := tls.NewListener(lis, sc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := tlsLis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	defer func() { tlsLis.Close(); <-done }()

	mem := checked(t)
	fx := newFixture(t, mem, 10, 1<<20)
	c := testClient(t, "grpc+tls://"+lis.Addr().String(), flightclient.Zerobus)
	stats, _, err := load(t.Context(), t, c, fx, 1)
	var te *flightclient.TLSError
	if !errors.As(err, &te) {
		t.Fatalf("Load() = %v; want a *TLSError", err)
	}
	if stats.Retries != 0 {
		t.Errorf("%d retries; want none", stats.Retries)
	}
}
