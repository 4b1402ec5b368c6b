package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/databricks"
	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

type doctorFlags struct {
	endpoint    endpointFlags
	like        string
	tableSchema string
	verify      verifyFlags
	timeout     time.Duration
}

// errDoctor is a doctor run where a check failed (exit 1; the lines said which).
var errDoctor = errors.New("some checks failed")

func (a *app) doctorCommand() *cobra.Command {
	var f doctorFlags
	cmd := &cobra.Command{
		Use:   "doctor --table NAME [--like FILE | --table-schema COLS] [--sql-warehouse ID] [--profile P] [--ca-cert F]",
		Short: "Check the prerequisites of loading into Databricks through Zerobus",
		Long: `Check, one line each, what a load into Databricks needs, with a fix for each failure:

  1. the Zerobus endpoint resolves and answers TLS
  2. the workspace URL answers the OIDC token endpoint
  3. the credentials mint a token for this table
  4. a schema-only DoPut gets READY: the table exists and accepts the schema (--like FILE or
     --table-schema)
  5. with a SQL warehouse, the table can be counted

The endpoint and credentials are found as ` + "`loader load`" + ` finds them: --endpoint or
$ZEROBUS_SERVER_ENDPOINT, and $DATABRICKS_CLIENT_ID, $DATABRICKS_CLIENT_SECRET and
$DATABRICKS_WORKSPACE_URL (or $DATABRICKS_HOST), or a profile of ~/.databrickscfg. A check that cannot
run says why. The exit status is 1 when a check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.doctor(cmd.Context(), &f) },
	}
	fl := cmd.Flags()
	f.endpoint.register(fl)
	_ = fl.MarkHidden("protocol")
	fl.StringVar(&f.like, "like", "", "a file whose columns the load will send (check 4)")
	fl.StringVar(&f.tableSchema, "table-schema", "", "the table's columns in Databricks SQL, instead of --like (check 4)")
	f.verify.register(fl)
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long each check may take")
	return cmd
}

// check is one line of the report.
type check struct {
	n    int
	what string
}

type doctorReport struct {
	w      io.Writer
	failed bool
}

func (r *doctorReport) ok(c check, detail string) {
	fmt.Fprintf(r.w, "ok    %d. %s: %s\n", c.n, c.what, detail)
}

func (r *doctorReport) fail(c check, err error, fix string) {
	r.failed = true
	fmt.Fprintf(r.w, "FAIL  %d. %s: %v\n", c.n, c.what, err)
	if fix != "" {
		fmt.Fprintf(r.w, "      fix: %s\n", fix)
	}
}

func (r *doctorReport) skip(c check, why string) {
	fmt.Fprintf(r.w, "skip  %d. %s: %s\n", c.n, c.what, why)
}

func (a *app) doctor(ctx context.Context, f *doctorFlags) error {
	if f.endpoint.table == "" {
		return usagef("--table is required")
	}
	table, err := tableschema.ParseTableName(f.endpoint.table)
	if err != nil {
		return usageError{err}
	}
	if f.like != "" && f.tableSchema != "" {
		return usagef("give at most one of --like and --table-schema")
	}
	r, err := resolveRemote(&f.endpoint, flightclient.Zerobus, a.logger)
	if err != nil {
		return err
	}
	if r == nil {
		return usagef("no Zerobus endpoint: give --endpoint or set $%s", databricks.EnvServerEndpoint)
	}
	rep := &doctorReport{w: a.stdout}
	checks := []check{{1, "endpoint answers TLS"}, {2, "workspace answers the OIDC token endpoint"}, {3, "credentials mint a token for " + table.String()},
		{4, "table accepts the schema (READY)"}, {5, "table can be counted through the SQL warehouse"}}
	timed := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, f.timeout) }

	// 1. The endpoint.
	c, cancel := timed()
	detail, err := probeEndpoint(c, r)
	cancel()
	endpointOK := err == nil
	if endpointOK {
		rep.ok(checks[0], detail)
	} else {
		rep.fail(checks[0], err, endpointFix(err))
	}

	// 2. The workspace's token endpoint.
	workspaceOK := false
	if r.tokens == nil {
		rep.skip(checks[1], "no Databricks client credentials ($DATABRICKS_CLIENT_ID, $DATABRICKS_CLIENT_SECRET, $DATABRICKS_WORKSPACE_URL, or --profile)")
	} else {
		c, cancel := timed()
		err := probeTokenEndpoint(c, r)
		cancel()
		if err == nil {
			workspaceOK = true
			rep.ok(checks[1], r.tokens.TokenURL())
		} else {
			fix := "set $DATABRICKS_WORKSPACE_URL (or the profile's host) to the workspace URL, https://<workspace>.cloud.databricks.com"
			if isCertError(err) {
				fix = "pass the workspace's CA certificate with --ca-cert FILE"
			}
			rep.fail(checks[1], err, fix)
		}
	}

	// 3. A token for the table.
	tokenOK := false
	switch {
	case r.tokens == nil:
		rep.skip(checks[2], "no Databricks client credentials")
	case !workspaceOK:
		rep.skip(checks[2], "the token endpoint does not answer (check 2)")
	default:
		c, cancel := timed()
		_, err := r.tokens.Token(c, table)
		cancel()
		if err == nil {
			tokenOK = true
			rep.ok(checks[2], "minted (the token is not shown)")
		} else {
			rep.fail(checks[2], err, tokenFix(err))
		}
	}

	// 4. READY for the schema.
	var schema *tableschema.Schema
	schemaWhy := ""
	switch {
	case f.like != "":
		if schema, err = schemaLike(ctx, f.like); err != nil {
			schemaWhy = err.Error()
		}
	case f.tableSchema != "":
		if schema, err = tableschema.ParseColumns(f.tableSchema); err != nil {
			return usagef("--table-schema: %w", err)
		}
	default:
		schemaWhy = "no schema to send: give --like FILE or --table-schema COLS"
	}
	switch {
	case schemaWhy != "":
		rep.skip(checks[3], schemaWhy)
	case !endpointOK:
		rep.skip(checks[3], "the endpoint does not answer (check 1)")
	case r.tokens != nil && !tokenOK:
		rep.skip(checks[3], "no token for the table (check 3)")
	default:
		c, cancel := timed()
		err := probeReady(c, r, &f.endpoint, table, schema)
		cancel()
		if err == nil {
			rep.ok(checks[3], fmt.Sprintf("READY for %d columns", len(schema.Fields)))
		} else {
			rep.fail(checks[3], err, readyFix(err))
		}
	}

	// 5. Counting.
	counter, cerr := f.verify.counter(r)
	switch {
	case cerr != nil:
		rep.skip(checks[4], "needs Databricks client credentials")
	case counter == nil:
		rep.skip(checks[4], "no SQL warehouse given (--sql-warehouse or $DATABRICKS_WAREHOUSE_ID)")
	case !workspaceOK:
		rep.skip(checks[4], "the workspace does not answer (check 2)")
	default:
		c, cancel := timed()
		n, err := counter.Count(c, table)
		cancel()
		if err == nil {
			rep.ok(checks[4], fmt.Sprintf("%d rows", n))
		} else {
			rep.fail(checks[4], err, "check the warehouse id (SQL Warehouses page, Connection details) and that the service principal may use the warehouse and SELECT on the table")
		}
	}
	if rep.failed {
		return errDoctor
	}
	return nil
}

// probeEndpoint resolves the endpoint's host and completes a TLS handshake (a TCP connection for
// grpc://), through the proxy when one applies.
func probeEndpoint(ctx context.Context, r *remote) (string, error) {
	ep, err := flightclient.ParseEndpoint(r.endpoint)
	if err != nil {
		return "", err
	}
	proxy, err := r.proxy.GRPCProxy(ep.Address)
	if err != nil {
		return "", err
	}
	via := ""
	if proxy == nil {
		if _, err := net.DefaultResolver.LookupHost(ctx, ep.Host); err != nil {
			return "", err
		}
	} else {
		via = " through proxy " + proxy.Redacted()
	}
	conn, err := r.proxy.Dial(ctx, ep.Address)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if !ep.TLS {
		return ep.Address + " answers (plaintext grpc://)" + via, nil
	}
	tc := r.tls.Clone()
	tc.ServerName, tc.NextProtos = ep.Host, []string{"h2"}
	tconn := tls.Client(conn, tc)
	if err := tconn.HandshakeContext(ctx); err != nil {
		return "", err
	}
	st := tconn.ConnectionState()
	return fmt.Sprintf("%s answers %s, certificate verified for %s%s", ep.Address, tls.VersionName(st.Version), ep.Host, via), nil
}

// probeTokenEndpoint posts an empty client-credentials request without credentials: a workspace
// answers 400 or 401 with an OAuth error; 404 or no answer means this is not a workspace URL.
func probeTokenEndpoint(ctx context.Context, r *remote) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.tokens.TokenURL(), strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	switch res.StatusCode {
	case http.StatusBadRequest, http.StatusUnauthorized:
		return nil
	default:
		return fmt.Errorf("%s answered HTTP %d to a token request without credentials; want 400 or 401", r.tokens.TokenURL(), res.StatusCode)
	}
}

// probeReady opens a schema-only DoPut.
func probeReady(ctx context.Context, r *remote, f *endpointFlags, table tableschema.TableName, schema *tableschema.Schema) error {
	opts := append([]flightclient.Option{flightclient.WithUserAgent(userAgent())}, r.opts...)
	if f.token != "" {
		opts = append(opts, flightclient.WithToken(f.token))
	}
	c, err := flightclient.New(r.endpoint, flightclient.Zerobus, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	enc, err := partitioner.NewEncoder(schema.Arrow(), partitioner.DefaultMaxFrameBytes)
	if err != nil {
		return err
	}
	return c.Probe(ctx, table, enc)
}

const grantFix = "grant MODIFY and SELECT directly on the table; ALL PRIVILEGES is not enough (`loader table ddl` prints the GRANT statements)"

func endpointFix(err error) string {
	var dns *net.DNSError
	switch {
	case isCertError(err):
		return "pass the server's CA certificate with --ca-cert FILE, or check the endpoint's host name"
	case errors.As(err, &dns):
		return "check the endpoint: https://<workspace-id>.zerobus.<region>.cloud.databricks.com (and HTTPS_PROXY behind a proxy)"
	}
	return "check the endpoint's host and port, and HTTPS_PROXY/NO_PROXY behind a proxy"
}

func tokenFix(err error) string {
	var te *databricks.TokenError
	if errors.As(err, &te) && te.Likely() == databricks.LikelyGrants {
		return grantFix
	}
	if h := databricksHint(err); h != "" {
		return h
	}
	return "check the workspace URL and the network"
}

func readyFix(err error) string {
	if se, ok := zerobus.AsSchemaError(err); ok {
		return fmt.Sprintf("make the table's columns match the file (causes: %v); `loader plan` shows the differences", se.Causes)
	}
	if zerobus.IsTableNotGranted(err) {
		return grantFix
	}
	return databricksHint(err)
}
