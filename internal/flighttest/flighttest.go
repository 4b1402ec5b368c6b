// Package flighttest serves Arrow Flight servers for tests: a real gRPC server on a loopback port that
// lives as long as the test. It is used only by tests.
package flighttest

import (
	"net"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
)

// Serve serves srv on 127.0.0.1:0 until the test ends and returns its address (host:port). The
// server waits for its handlers when it stops, so nothing it started outlives the test.
func Serve(t testing.TB, srv flight.FlightServer, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(append([]grpc.ServerOption{grpc.WaitForHandlers(true)}, opts...)...)
	flight.RegisterFlightServiceServer(gs, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
}
