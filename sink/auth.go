package sink

import (
	"context"
	"crypto/subtle"
	"fmt"
	"runtime/debug"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/zerobus"
)

// errUnauthenticated never echoes what the caller sent.
var errUnauthenticated = status.Error(codes.Unauthenticated,
	`missing or invalid bearer token: send the gRPC header "authorization: Bearer <token>" with one of the sink's tokens`)

// authorize checks the bearer token when tokens are configured.
func (s *Server) authorize(ctx context.Context) error {
	oauth := s.oauth != nil && s.oauth.cfg != nil
	if len(s.cfg.tokens) == 0 && !oauth {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if oauth {
		ok, err := s.authorizeOAuth(ctx, md)
		if ok || err != nil {
			return err
		}
	}
	for _, v := range md.Get(zerobus.HeaderAuthorization) {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		tok = strings.TrimSpace(tok)
		for _, want := range s.cfg.tokens {
			if subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1 {
				return nil
			}
		}
	}
	return errUnauthenticated
}

func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	defer s.recoverPanic(info.FullMethod, &err)
	return handler(ctx, req)
}

func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	if err := s.authorize(ss.Context()); err != nil {
		return err
	}
	if err := s.standIn(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	defer s.recoverPanic(info.FullMethod, &err)
	return handler(srv, ss)
}

// recoverPanic turns a panic in a handler into Internal, so one bad call cannot take the server down.
func (s *Server) recoverPanic(method string, err *error) {
	if r := recover(); r != nil {
		s.log.Error("sink: panic in handler", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "sink: internal error in %s", method)
	}
}
