package flightclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/flightclient"
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("parquet: corrupt footer"), false},
		{context.Canceled, false},
		{status.Error(codes.Unavailable, "restarting"), true},
		{fmt.Errorf("count: %w", status.Error(codes.Unavailable, "EOF")), true},
		{status.Error(codes.ResourceExhausted, "slow down"), true},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{status.Error(codes.NotFound, "no table"), false},
	} {
		if got := flightclient.Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}
