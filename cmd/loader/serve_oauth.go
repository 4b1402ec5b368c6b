package main

import (
	"crypto/tls"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/loaderproject/loader/sink"
)

// serveOAuthFlags make `loader serve` a stand-in for a Databricks workspace: OAuth, TLS, SQL API.
type serveOAuthFlags struct {
	client           string
	tokenTTL         time.Duration
	tlsCert, tlsKey  string
	tokenUnavailable int
}

func (f *serveOAuthFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.client, "oauth-client", "", "serve the OIDC token endpoint and the SQL Statement API for this service principal, ID:SECRET; Flight then accepts only the tokens issued")
	fl.DurationVar(&f.tokenTTL, "token-ttl", time.Hour, "lifetime of the OAuth tokens issued (whole seconds)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve over TLS with this PEM certificate (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the PEM private key of --tls-cert")
	fl.IntVar(&f.tokenUnavailable, "fault-token-unavailable", 0, "test fault: the token endpoint answers the next N requests with 503")
}

func (f *serveOAuthFlags) options() ([]sink.Option, error) {
	var opts []sink.Option
	if f.client != "" {
		id, secret, ok := strings.Cut(f.client, ":")
		if !ok || id == "" || secret == "" {
			return nil, usagef("--oauth-client: want ID:SECRET")
		}
		if f.tokenTTL < time.Second {
			return nil, usagef("--token-ttl %s: want at least 1s", f.tokenTTL)
		}
		opts = append(opts, sink.WithOAuth(sink.OAuth{ClientID: id, ClientSecret: secret, TokenTTL: f.tokenTTL, FailTokenRequests: f.tokenUnavailable}))
	} else if f.tokenUnavailable > 0 {
		return nil, usagef("--fault-token-unavailable needs --oauth-client")
	}
	switch {
	case f.tlsCert != "" && f.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %w", err)
		}
		opts = append(opts, sink.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	case f.tlsCert != "" || f.tlsKey != "":
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	return opts, nil
}
