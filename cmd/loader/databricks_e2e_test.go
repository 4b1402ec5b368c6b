package main_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/dustin/go-humanize"

	"github.com/loaderproject/loader/databricks"
	"github.com/loaderproject/loader/internal/proxytest"
	"github.com/loaderproject/loader/internal/testcert"
	"github.com/loaderproject/loader/tableschema"
)

const (
	spID     = "sp-loader"
	spSecret = "s3cret-never-printed"
	wsHost   = "1234567890.zerobus.test" // resolved only by the test proxy
)

// workspace is a `loader serve` standing in for a Databricks workspace and its Zerobus endpoint:
// OAuth, TLS with a CA made for the test, and two tables.
type workspace struct {
	*server
	certs testcert.Files
	data  string // Parquet files to load
	rows  int64
	url   string // https://127.0.0.1:PORT
}

func startWorkspace(t *testing.T, extra ...string) *workspace {
	t.Helper()
	certs, err := testcert.Write(t.TempDir(), "127.0.0.1", wsHost)
	if err != nil {
		t.Fatal(err)
	}
	wh := t.TempDir()
	data := writeParquetParts(t, 2, 20_000)
	for _, name := range []string{tableName, "main.default.other"} {
		mustLoader(t, "table", "create", name, "--warehouse", wh, "--like", filepath.Join(data, "part-0.parquet"))
	}
	args := append([]string{"--oauth-client", spID + ":" + spSecret, "--tls-cert", certs.Cert, "--tls-key", certs.Key}, extra...)
	s := serve(t, wh, args...)
	return &workspace{server: s, certs: certs, data: data, rows: 40_000, url: "https://" + s.addr}
}

// env is the environment of a loader run: nothing of the caller's Databricks or proxy settings, a
// home of its own, and the given variables.
func (w *workspace) env(t *testing.T, kv ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		if strings.HasPrefix(k, "DATABRICKS_") || strings.HasPrefix(k, "ZEROBUS_") || strings.Contains(strings.ToLower(k), "proxy") || k == "HOME" {
			continue
		}
		env = append(env, e)
	}
	return append(env, append([]string{"HOME=" + t.TempDir(), "XDG_STATE_HOME=" + t.TempDir()}, kv...)...)
}

// creds are the environment variables of the service principal.
func (w *workspace) creds(secret string) []string {
	return []string{"DATABRICKS_CLIENT_ID=" + spID, "DATABRICKS_CLIENT_SECRET=" + secret,
		"DATABRICKS_WORKSPACE_URL=" + w.url, "ZEROBUS_SERVER_ENDPOINT=" + w.url}
}

func runEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("loader %v: %v", args, err)
	}
	r := result{out.String(), errb.String(), code}
	if strings.Contains(r.stdout+r.stderr, spSecret) {
		t.Errorf("loader %v printed the client secret", args)
	}
	return r
}

func (w *workspace) mustLoad(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r := runEnv(t, env, append([]string{"load", "--table", tableName, "--json", "--quiet"}, append(args, w.data)...)...)
	if r.code != 0 {
		t.Fatalf("load %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// sqlCount counts the table's committed rows through the workspace's SQL API.
func (w *workspace) sqlCount(t *testing.T) int64 {
	t.Helper()
	pool, err := w.certs.Pool()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	toks := databricks.NewTokens(databricks.TokenConfig{HTTPClient: hc,
		Credentials: databricks.Credentials{ClientID: spID, ClientSecret: spSecret, WorkspaceURL: w.url}})
	c := &databricks.SQLCounter{Tokens: toks, WarehouseID: "wh", HTTPClient: hc}
	n, err := c.Count(context.Background(), tableschema.TableName{Catalog: "main", Schema: "default", Table: "events"})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDatabricksOAuthTLS loads through OAuth and TLS with tokens that expire during the load, and
// checks each way a login fails.
func TestDatabricksOAuthTLS(t *testing.T) {
	// Tokens live 2 s and are refreshed after half of it. Each DoPut reads at most 1 MB/s and is
	// asked to rotate after 4 frames, so the ~6.6 MB load over 2 streams lasts over 3 s, with new
	// DoPuts opening all along: the later ones need a new token.
	w := startWorkspace(t, "--token-ttl", "2s", "--fault-rotate-after", "4", "--stream-rate-limit", "1MB/s")

	t.Run("refreshes during the load and verifies through SQL", func(t *testing.T) {
		r := w.mustLoad(t, w.env(t, w.creds(spSecret)...), "--ca-cert", w.certs.CA, "--streams", "2", "--max-frame-bytes", "64KiB",
			"--log-level", "debug", "--sql-warehouse", "wh1")
		sum := parseSummary(t, r.stdout)
		if sum.Rows != w.rows || sum.VerifiedRows == nil || *sum.VerifiedRows != w.rows {
			t.Fatalf("rows %d, verified %v; want %d both\n%s", sum.Rows, sum.VerifiedRows, w.rows, r.stdout)
		}
		if sum.VisibleAfterSeconds == nil || sum.VerifyWarning != "" {
			t.Errorf("visible_after_seconds %v, warning %q; want a time and no warning", sum.VisibleAfterSeconds, sum.VerifyWarning)
		}
		if mints := strings.Count(r.stderr, `msg="minted an OAuth token" for=main.default.events`); mints < 2 {
			t.Errorf("%d tokens minted for the table during a load longer than a token's life; want at least 2\n%s", mints, r.stderr)
		}
		if !strings.Contains(r.stderr, "expires=") || strings.Contains(r.stderr, "level=WARN") || strings.Contains(r.stderr, "level=ERROR") ||
			strings.Contains(r.stderr, "refused the token") {
			t.Errorf("want debug lines saying when tokens expire, no warning or error, and no token refused:\n%s", r.stderr)
		}
		if n := w.sqlCount(t); n != w.rows {
			t.Errorf("the SQL API counts %d rows; want %d", n, w.rows)
		}
	})

	t.Run("a token for another table is refused", func(t *testing.T) {
		pool, err := w.certs.Pool()
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		toks := databricks.NewTokens(databricks.TokenConfig{HTTPClient: hc, WorkspaceID: "1234567890",
			Credentials: databricks.Credentials{ClientID: spID, ClientSecret: spSecret, WorkspaceURL: w.url}})
		other, err := toks.Token(context.Background(), tableschema.TableName{Catalog: "main", Schema: "default", Table: "other"})
		if err != nil {
			t.Fatal(err)
		}
		r := runEnv(t, w.env(t), "load", "--table", tableName, "--endpoint", w.url, "--ca-cert", w.certs.CA, "--token", other,
			"--table-schema", "id BIGINT", "--quiet", w.data)
		if r.code != 1 || !strings.Contains(r.stderr, "PermissionDenied") || !strings.Contains(r.stderr, "4024") ||
			!strings.Contains(r.stderr, "grant MODIFY and SELECT directly on the table") {
			t.Errorf("exit %d; want 1 with PermissionDenied, error 4024 and the grants hint:\n%s", r.code, r.stderr)
		}
	})

	t.Run("a wrong secret fails fast with the likely cause", func(t *testing.T) {
		r := runEnv(t, w.env(t, w.creds("wrong-secret")...), "load", "--table", tableName, "--ca-cert", w.certs.CA, "--quiet", w.data)
		if r.code != 1 || !strings.Contains(r.stderr, "client secret is likely wrong") || !strings.Contains(r.stderr, `"Client authentication failed"`) ||
			strings.Contains(r.stderr, "retrying") {
			t.Errorf("exit %d; want 1 at once, naming the client id or secret and quoting the endpoint:\n%s", r.code, r.stderr)
		}
	})

	t.Run("without the CA the handshake fails clearly", func(t *testing.T) {
		r := runEnv(t, w.env(t, w.creds(spSecret)...), "load", "--table", tableName, "--quiet", w.data)
		if r.code != 1 || !strings.Contains(r.stderr, "certificate") || !strings.Contains(r.stderr, "--ca-cert") {
			t.Errorf("token endpoint without --ca-cert: exit %d; want 1 with a certificate error and the --ca-cert hint:\n%s", r.code, r.stderr)
		}
		// Flight itself, with a static token: the TLS error stops the load without retries.
		r = runEnv(t, w.env(t), "load", "--table", tableName, "--endpoint", w.url, "--token", "x", "--table-schema", "id BIGINT", "--quiet", w.data)
		if r.code != 1 || !strings.Contains(r.stderr, "server certificate was not verified") || !strings.Contains(r.stderr, "--ca-cert") {
			t.Errorf("Flight without --ca-cert: exit %d; want 1 with the TLS error and the --ca-cert hint:\n%s", r.code, r.stderr)
		}
	})

	t.Run("a profile in ~/.databrickscfg", func(t *testing.T) {
		env := w.env(t, "ZEROBUS_SERVER_ENDPOINT="+w.url)
		home := ""
		for _, e := range env {
			if h, ok := strings.CutPrefix(e, "HOME="); ok {
				home = h
			}
		}
		cfg := "[DEFAULT]\nhost = https://wrong.example\n\n[staging]\nhost = " + w.url + "\nclient_id = " + spID + "\nclient_secret = " + spSecret + "\n"
		if err := os.WriteFile(filepath.Join(home, ".databrickscfg"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		r := w.mustLoad(t, env, "--profile", "staging", "--ca-cert", w.certs.CA)
		if sum := parseSummary(t, r.stdout); sum.Rows != w.rows {
			t.Errorf("rows %d; want %d", sum.Rows, w.rows)
		}
		r = runEnv(t, append(env, "DATABRICKS_CONFIG_PROFILE=nosuch"), "load", "--table", tableName, "--ca-cert", w.certs.CA, "--quiet", w.data)
		if r.code != 2 || !strings.Contains(r.stderr, `"nosuch"`) {
			t.Errorf("a missing profile: exit %d; want 2 naming it:\n%s", r.code, r.stderr)
		}
	})
}

// TestDatabricksTokenEndpointRetries: the token endpoint answers 503 twice, then works.
func TestDatabricksTokenEndpointRetries(t *testing.T) {
	w := startWorkspace(t, "--fault-token-unavailable", "2")
	r := w.mustLoad(t, w.env(t, w.creds(spSecret)...), "--ca-cert", w.certs.CA, "--log-level", "warn")
	if sum := parseSummary(t, r.stdout); sum.Rows != w.rows {
		t.Errorf("rows %d; want %d", sum.Rows, w.rows)
	}
	if n := strings.Count(r.stderr, "the token endpoint failed; retrying"); n != 2 {
		t.Errorf("%d retries logged; want 2:\n%s", n, r.stderr)
	}
}

// TestDatabricksThroughProxy: an HTTP CONNECT proxy carries the token request, the SQL API and
// Flight; the workspace's host name resolves only at the proxy.
func TestDatabricksThroughProxy(t *testing.T) {
	w := startWorkspace(t)
	_, port, _ := net.SplitHostPort(w.addr)
	p, err := proxytest.Start(func(hostport string) string {
		if h, _, _ := net.SplitHostPort(hostport); h == wsHost {
			return w.addr
		}
		return hostport
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u := "https://" + net.JoinHostPort(wsHost, port)
	env := w.env(t, "DATABRICKS_CLIENT_ID="+spID, "DATABRICKS_CLIENT_SECRET="+spSecret, "DATABRICKS_HOST="+u,
		"ZEROBUS_SERVER_ENDPOINT="+u, "HTTPS_PROXY="+p.URL, "NO_PROXY=example.invalid")
	r := w.mustLoad(t, env, "--ca-cert", w.certs.CA, "--sql-warehouse", "wh1")
	sum := parseSummary(t, r.stdout)
	if sum.Rows != w.rows || sum.VerifiedRows == nil || *sum.VerifiedRows != w.rows {
		t.Errorf("rows %d, verified %v; want %d", sum.Rows, sum.VerifiedRows, w.rows)
	}
	want := net.JoinHostPort(wsHost, port)
	n := 0
	for _, tgt := range p.Targets() {
		if tgt != want {
			t.Errorf("tunnel to %q; want only %q", tgt, want)
		}
		n++
	}
	// At least one tunnel for the token and SQL requests and one per gRPC connection.
	if n < 2 {
		t.Errorf("%d tunnels; want the HTTP requests and the gRPC connections through the proxy", n)
	}
	// NO_PROXY naming the host sends it direct, where the name does not resolve.
	r = runEnv(t, append(env, "NO_PROXY="+wsHost), "load", "--table", tableName, "--ca-cert", w.certs.CA, "--quiet", w.data)
	if r.code == 0 {
		t.Errorf("with NO_PROXY=%s the load went through; want it to fail (the name resolves only at the proxy)", wsHost)
	}
}

// TestDatabricksVerifySlowCommit: rows acknowledged but not committed within --verify-timeout are a
// warning with exit 0, saying they are durable but not yet visible.
func TestDatabricksVerifySlowCommit(t *testing.T) {
	w := startWorkspace(t, "--commit-interval", "1h")
	r := w.mustLoad(t, w.env(t, w.creds(spSecret)...), "--ca-cert", w.certs.CA, "--sql-warehouse", "wh1", "--verify-timeout", "1s")
	sum := parseSummary(t, r.stdout)
	if sum.Rows != w.rows || sum.VerifiedRows == nil || *sum.VerifiedRows != 0 || sum.VisibleAfterSeconds != nil {
		t.Errorf("rows %d, verified %v, visible after %v; want %d acknowledged, 0 visible, no time", sum.Rows, sum.VerifiedRows, sum.VisibleAfterSeconds, w.rows)
	}
	if !strings.Contains(sum.VerifyWarning, "durable but not yet visible") || !strings.Contains(r.stderr, "durable but not yet visible") {
		t.Errorf("warning %q, stderr %q; want both to say durable but not yet visible", sum.VerifyWarning, r.stderr)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil || raw["verify_warning"] == nil {
		t.Errorf("--json lacks verify_warning: %s", r.stdout)
	}
}

// TestDoctor: every check passes against the stand-in workspace, and each failure gives its fix.
func TestDoctor(t *testing.T) {
	w := startWorkspace(t)
	like := filepath.Join(w.data, "part-0.parquet")
	doctor := func(env []string, args ...string) result {
		return runEnv(t, env, append([]string{"doctor", "--table", tableName}, args...)...)
	}
	good := w.env(t, w.creds(spSecret)...)

	r := doctor(good, "--ca-cert", w.certs.CA, "--like", like, "--sql-warehouse", "wh1")
	if r.code != 0 || strings.Count(r.stdout, "\nok ")+boolInt(strings.HasPrefix(r.stdout, "ok ")) != 5 {
		t.Errorf("all checks: exit %d; want 0 and five ok lines:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		failLine string // the failing check's line starts with this
		fix      string
	}{
		{"no CA", good, []string{"--like", like}, "FAIL  1.", "--ca-cert"},
		{"wrong secret", w.env(t, w.creds("wrong")...), []string{"--ca-cert", w.certs.CA, "--like", like}, "FAIL  3.", "DATABRICKS_CLIENT_SECRET"},
		{"table without grants", good, []string{"--ca-cert", w.certs.CA, "--like", like, "--table", "main.default.missing"}, "FAIL  3.", "ALL PRIVILEGES is not enough"},
		{"schema the table refuses", good, []string{"--ca-cert", w.certs.CA, "--table-schema", "id BIGINT, nope STRING"}, "FAIL  4.", "FIELD_NOT_IN_TABLE"},
		{"workspace URL wrong", append(w.env(t, w.creds(spSecret)...), "DATABRICKS_WORKSPACE_URL=https://127.0.0.1:1"), []string{"--ca-cert", w.certs.CA}, "FAIL  2.", "DATABRICKS_WORKSPACE_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := doctor(tc.env, tc.args...)
			idx := strings.Index(r.stdout, tc.failLine)
			if r.code != 1 || idx < 0 || !strings.Contains(r.stdout[idx:], "fix: ") || !strings.Contains(r.stdout[idx:], tc.fix) {
				t.Errorf("exit %d; want 1 with %q and a fix naming %q:\n%s%s", r.code, tc.failLine, tc.fix, r.stdout, r.stderr)
			}
			if n := strings.Count(r.stdout, "\n"); n < 5 {
				t.Errorf("%d lines; want one per check, five:\n%s", n, r.stdout)
			}
		})
	}
	t.Run("another table's token gets 4024 at READY", func(t *testing.T) {
		pool, err := w.certs.Pool()
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		toks := databricks.NewTokens(databricks.TokenConfig{HTTPClient: hc, WorkspaceID: "1",
			Credentials: databricks.Credentials{ClientID: spID, ClientSecret: spSecret, WorkspaceURL: w.url}})
		other, err := toks.Token(context.Background(), tableschema.TableName{Catalog: "main", Schema: "default", Table: "other"})
		if err != nil {
			t.Fatal(err)
		}
		r := doctor(w.env(t), "--endpoint", w.url, "--token", other, "--ca-cert", w.certs.CA, "--like", like)
		if r.code != 1 || !strings.Contains(r.stdout, "FAIL  4.") || !strings.Contains(r.stdout, "4024") || !strings.Contains(r.stdout, "ALL PRIVILEGES is not enough") {
			t.Errorf("exit %d; want check 4 to fail with 4024 and the grants fix:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestTableDDLRoundTrip: every type of the canonical table goes through `table ddl` and back through
// `table create --columns` to the same columns as `table create --like`.
func TestTableDDLRoundTrip(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "types.arrow")
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8}, {Name: "i16", Type: arrow.PrimitiveTypes.Int16},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32}, {Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32}, {Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}, {Name: "s", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true}, {Name: "dec", Type: &arrow.Decimal128Type{Precision: 12, Scale: 3}, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true}, {Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "ntz", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "arr", Type: arrow.ListOf(arrow.BinaryTypes.LargeString), Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.LargeString, arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b_c", Type: arrow.BinaryTypes.LargeString, Nullable: true}), Nullable: true},
	}, nil)
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	wr, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ddl := mustLoader(t, "table", "ddl", "--like", file, "--name", "main.default.types", "--principal", "app-123").stdout
	for _, want := range []string{"CREATE TABLE IF NOT EXISTS `main`.`default`.`types` (", ") USING DELTA;",
		"GRANT USE CATALOG ON CATALOG `main` TO `app-123`;", "GRANT USE SCHEMA ON SCHEMA `main`.`default` TO `app-123`;",
		"GRANT MODIFY, SELECT ON TABLE `main`.`default`.`types` TO `app-123`;"} {
		if !strings.Contains(ddl, want) {
			t.Errorf("ddl lacks %q:\n%s", want, ddl)
		}
	}
	start := strings.Index(ddl, "(\n")
	end := strings.Index(ddl, "\n) USING DELTA")
	if start < 0 || end < start {
		t.Fatalf("no column list in:\n%s", ddl)
	}
	var cols []string
	for _, line := range strings.Split(ddl[start+2:end], "\n") {
		cols = append(cols, strings.TrimSuffix(strings.TrimSpace(line), ","))
	}
	wh := t.TempDir()
	fromDDL := mustLoader(t, "table", "create", "main.default.a", "--warehouse", wh, "--columns", strings.Join(cols, ", ")).stdout
	fromFile := mustLoader(t, "table", "create", "main.default.b", "--warehouse", wh, "--like", file).stdout
	body := func(s string) string { _, rest, _ := strings.Cut(s, "\n"); return rest }
	if body(fromDDL) != body(fromFile) {
		t.Errorf("columns from the DDL:\n%s\nwant those of the file:\n%s", fromDDL, fromFile)
	}
	if strings.Count(body(fromFile), "\n") != len(schema.Fields()) {
		t.Errorf("%d columns; want %d:\n%s", strings.Count(body(fromFile), "\n"), len(schema.Fields()), fromFile)
	}
}

// TestBenchAgainstDatabricks runs loader bench's sweep against the Zerobus stand-in with OAuth and
// TLS, as a user measures how far Zerobus scales with streams: every run mints its tokens, and the
// table holds what the benchmark said it would write.
func TestBenchAgainstDatabricks(t *testing.T) {
	w := startWorkspace(t)
	out := t.TempDir()
	r := runEnv(t, w.env(t, w.creds(spSecret)...), "bench", "--table", tableName, "--ca-cert", w.certs.CA,
		"--streams", "1,2", "--repeat", "1", "--quiet", "--out", out, w.data)
	if r.code != 0 {
		t.Fatalf("bench: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	want := 2 * w.rows // two stream counts, one run each
	if !strings.Contains(r.stdout, "this WRITES "+humanize.Comma(want)+" rows into "+tableName) {
		t.Errorf("bench did not say it writes %d rows into %s:\n%s", want, tableName, r.stdout)
	}
	// The SQL API counts committed rows; the last run's acknowledged rows are committed within the
	// sink's commit interval.
	n := w.sqlCount(t)
	for deadline := time.Now().Add(time.Minute); n < want && time.Now().Before(deadline); n = w.sqlCount(t) {
		time.Sleep(50 * time.Millisecond)
	}
	if n != want {
		t.Errorf("the SQL API counts %d rows after the sweep; want %d", n, want)
	}
	var sum map[string]any
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sum["e2e_mb_s"].(float64); !ok || v <= 0 {
		t.Errorf("summary.json e2e_mb_s = %v; want a positive rate", sum["e2e_mb_s"])
	}
}
