package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/loaderproject/loader/databricks"
	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/netproxy"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/zerobus"
)

// remote is how the CLI reaches a remote endpoint: TLS roots, the proxy, and, for Zerobus with
// Databricks credentials, per-table OAuth tokens.
type remote struct {
	endpoint string
	tls      *tls.Config
	proxy    *netproxy.Config
	http     *http.Client
	creds    databricks.Credentials
	tokens   *databricks.Tokens // nil without OAuth credentials
	opts     []flightclient.Option
}

// tlsConfig returns the client TLS configuration: the system roots plus the CA file, if given.
func tlsConfig(caFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, usagef("--ca-cert: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usagef("--ca-cert %s: no PEM certificate in it", caFile)
	}
	tc.RootCAs = pool
	return tc, nil
}

// resolveRemote finds the endpoint (--endpoint, else ZEROBUS_SERVER_ENDPOINT for Zerobus) and its
// credentials. It returns nil when there is no remote endpoint (the embedded sink).
func resolveRemote(f *endpointFlags, dialect flightclient.Dialect, logger *slog.Logger) (*remote, error) {
	endpoint := f.endpoint
	if endpoint == "" && dialect == flightclient.Zerobus {
		endpoint = strings.TrimSpace(os.Getenv(databricks.EnvServerEndpoint))
	}
	if endpoint == "" {
		if f.profile != "" {
			return nil, usagef("--profile needs a Zerobus endpoint: --endpoint or $%s", databricks.EnvServerEndpoint)
		}
		return nil, nil
	}
	tc, err := tlsConfig(f.caCert)
	if err != nil {
		return nil, err
	}
	r := &remote{endpoint: endpoint, tls: tc, proxy: netproxy.FromEnv(os.Getenv)}
	r.http = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		Proxy: r.proxy.HTTPProxy(), TLSClientConfig: tc.Clone(), TLSHandshakeTimeout: 30 * time.Second,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
	}}
	r.opts = []flightclient.Option{flightclient.WithTLSConfig(tc), flightclient.WithDialer(r.proxy.Dial)}
	if dialect != flightclient.Zerobus || f.token != "" {
		return r, nil
	}
	home, _ := os.UserHomeDir()
	creds, err := databricks.LoadCredentials(os.LookupEnv, home, f.profile)
	switch {
	case errors.Is(err, databricks.ErrNoCredentials) && f.profile == "":
		logger.Debug("no Databricks client credentials; sending no token", "why", err)
		return r, nil
	case err != nil:
		return nil, usageError{err}
	}
	wsID, err := databricks.WorkspaceID(endpoint)
	if err != nil {
		return nil, usageError{err}
	}
	r.creds = creds
	r.tokens = databricks.NewTokens(databricks.TokenConfig{Credentials: creds, WorkspaceID: wsID, HTTPClient: r.http, Logger: logger})
	r.opts = append(r.opts, flightclient.WithTableTokens(r.tokens))
	logger.Debug("Databricks OAuth", "credentials", creds.String(), "workspace_id", wsID)
	return r, nil
}

// verifyFlags ask for a count through a SQL warehouse after a load.
type verifyFlags struct {
	sqlWarehouse  string
	verifyTimeout time.Duration
}

func (f *verifyFlags) register(fl interface {
	StringVar(p *string, name, value, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}) {
	fl.StringVar(&f.sqlWarehouse, "sql-warehouse", "", "SQL warehouse id: count the table through the SQL Statement Execution API before the load and after the last acknowledgement (default $DATABRICKS_WAREHOUSE_ID)")
	fl.DurationVar(&f.verifyTimeout, "verify-timeout", load.DefaultVerifyTimeout, "how long to wait for acknowledged rows to become visible to --sql-warehouse queries")
}

// counter returns the SQL counter, or nil when no warehouse is given.
func (f *verifyFlags) counter(r *remote) (*databricks.SQLCounter, error) {
	id := f.sqlWarehouse
	if id == "" {
		id = os.Getenv(databricks.EnvWarehouseID)
	}
	if id == "" && r != nil {
		id = r.creds.WarehouseID
	}
	if id == "" {
		return nil, nil
	}
	if r == nil || r.tokens == nil {
		return nil, usagef("--sql-warehouse needs a Zerobus endpoint and Databricks client credentials ($%s, $%s and $%s, or --profile)",
			databricks.EnvClientID, databricks.EnvClientSecret, databricks.EnvWorkspaceURL)
	}
	return &databricks.SQLCounter{Tokens: r.tokens, WarehouseID: id, HTTPClient: r.http}, nil
}

// databricksHint says how to get past the Databricks errors the CLI knows.
func databricksHint(err error) string {
	var (
		te  *databricks.TokenError
		tle *flightclient.TLSError
		pe  *databricks.ProfileError
	)
	switch {
	case errors.As(err, &te) && te.Likely() == databricks.LikelyCredentials:
		return "check $DATABRICKS_CLIENT_ID and $DATABRICKS_CLIENT_SECRET (or the profile's client_id and client_secret): the service principal's OAuth secret, not a personal access token"
	case errors.As(err, &te) && te.Likely() == databricks.LikelyGrants:
		return "grant MODIFY and SELECT directly on the table; ALL PRIVILEGES is not enough (`loader table ddl` prints the GRANT statements)"
	case errors.As(err, &te) && te.Likely() == databricks.LikelyWorkspace:
		return "set $DATABRICKS_WORKSPACE_URL (or the profile's host) to the workspace URL, https://<workspace>.cloud.databricks.com"
	case errors.As(err, &tle) || isCertError(err):
		return "pass the server's CA certificate with --ca-cert FILE, or check the endpoint's host name"
	case errors.As(err, &pe):
		return "see `databricks auth profiles`; the profile needs host, client_id and client_secret"
	case zerobus.IsTableNotGranted(err):
		return "grant MODIFY and SELECT directly on the table; ALL PRIVILEGES is not enough (`loader table ddl` prints the GRANT statements)"
	}
	return ""
}

// verifyAfterLoad counts the table through the SQL warehouse until the acknowledged rows are visible.
func verifyAfterLoad(ctx context.Context, c *databricks.SQLCounter, cfg *load.Config, before int64, sum *load.Summary, timeout time.Duration) error {
	return load.VerifyVisible(ctx, c, cfg.Table, before, sum, timeout, load.DefaultVerifyPoll)
}

// isCertError reports whether err is a server certificate that failed verification.
func isCertError(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn)
}
