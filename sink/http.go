package sink

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/soheilhy/cmux"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// OAuth is the sink's stand-in for a workspace's OAuth machine-to-machine login: one service
// principal (client id and secret) that may mint tokens at /oidc/v1/token.
type OAuth struct {
	ClientID     string
	ClientSecret string
	// TokenTTL is the lifetime of the tokens issued; default 1 hour (as Unity Catalog issues them).
	// It is rounded up to whole seconds.
	TokenTTL time.Duration
	// FailTokenRequests makes the token endpoint answer the next this-many requests with 503 (a test
	// fault; 0: none).
	FailTokenRequests int
}

// WithOAuth makes the sink stand in for a Databricks workspace: it serves the OIDC token endpoint and
// the SQL Statement Execution API over HTTP on the Flight address (one listener; gRPC and HTTP are
// told apart by content type), and accepts on Flight only the tokens it issued, each for the tables
// its authorization_details granted. Tokens die with the server (their signing key is made at
// start). WithTokens' static tokens are still accepted.
func WithOAuth(o OAuth) Option {
	return func(c *config) {
		if o.TokenTTL <= 0 {
			o.TokenTTL = time.Hour
		}
		c.oauth = &o
	}
}

// WithTLS serves Flight (and the HTTP APIs) over TLS with this configuration (certificates set).
// Default: plaintext.
func WithTLS(tc *tls.Config) Option {
	return func(c *config) { c.tls = tc }
}

// oauthState is what the HTTP side keeps.
type oauthState struct {
	cfg      *OAuth
	key      []byte
	failLeft atomic.Int64

	mu    sync.Mutex
	stmts map[string]statementResult
	seq   atomic.Int64
}

type statementResult struct {
	body []byte
}

// claims are the sink's tokens: subject (the client id), expiry, and the tables granted (none for a
// workspace token).
type claims struct {
	Tables []string `json:"tables,omitempty"`
	jwt.RegisteredClaims
}

func newOAuthState(o *OAuth) *oauthState {
	st := &oauthState{cfg: o, key: make([]byte, 32), stmts: map[string]statementResult{}}
	_, _ = rand.Read(st.key)
	if o != nil {
		st.failLeft.Store(int64(o.FailTokenRequests))
	}
	return st
}

// httpEnabled reports whether Serve splits the listener into gRPC and HTTP.
func (s *Server) httpEnabled() bool { return s.cfg.oauth != nil || s.cfg.tls != nil }

// serveSplit serves gRPC and HTTP on lis (with TLS when configured) until Shutdown.
func (s *Server) serveSplit(lis net.Listener) error {
	if s.cfg.tls != nil {
		tc := s.cfg.tls.Clone()
		tc.NextProtos = []string{"h2", "http/1.1"}
		lis = tls.NewListener(lis, tc)
	}
	m := cmux.New(lis)
	// gRPC clients wait for the server's SETTINGS before sending headers, so the matcher sends them.
	grpcL := m.MatchWithWriters(cmux.HTTP2MatchHeaderFieldPrefixSendSettings("content-type", "application/grpc"))
	httpL := m.Match(cmux.Any())
	hs := &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 30 * time.Second}
	s.mu.Lock()
	s.mux, s.http = m, hs
	shut := s.shutdown
	s.mu.Unlock()
	if shut {
		lis.Close()
		return nil
	}
	errc := make(chan error, 3)
	go func() { errc <- s.grpc.Serve(grpcL) }()
	go func() { errc <- hs.Serve(httpL) }()
	go func() { errc <- m.Serve() }()
	var first error
	for range 3 {
		err := <-errc
		switch {
		case err == nil, errors.Is(err, grpc.ErrServerStopped), errors.Is(err, http.ErrServerClosed), errors.Is(err, net.ErrClosed),
			errors.Is(err, cmux.ErrListenerClosed), errors.Is(err, cmux.ErrServerClosed):
		default:
			if first == nil {
				first = err
			}
		}
		// One part ending ends the others' accepting; calls in flight are Shutdown's to end.
		m.Close()
		hs.Close()
	}
	if first != nil {
		return fmt.Errorf("sink: serve: %w", first)
	}
	return nil
}

// stopHTTP closes the HTTP side and the listener split (at Shutdown, after gRPC stopped).
func (s *Server) stopHTTP() {
	s.mu.Lock()
	m, hs := s.mux, s.http
	s.mu.Unlock()
	if hs != nil {
		hs.Close()
	}
	if m != nil {
		m.Close()
	}
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oidc/v1/token", s.tokenEndpoint)
	mux.HandleFunc("POST /api/2.0/sql/statements", s.sqlSubmit)
	mux.HandleFunc("GET /api/2.0/sql/statements/{id}", s.sqlGet)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code int, errCode, desc string) {
	writeJSON(w, code, map[string]string{"error": errCode, "error_description": desc})
}

// resourceRE is the Zerobus resource of a token request.
var resourceRE = regexp.MustCompile(`^api://databricks/workspaces/[^/]+/zerobusDirectWriteApi$`)

// authDetail is one entry of authorization_details.
type authDetail struct {
	Type       string   `json:"type"`
	Privileges []string `json:"privileges"`
	ObjectType string   `json:"object_type"`
	Path       string   `json:"object_full_path"`
	Operations []string `json:"operations"`
}

// tokenEndpoint is POST /oidc/v1/token: client credentials with Basic auth, as a workspace answers it.
func (s *Server) tokenEndpoint(w http.ResponseWriter, r *http.Request) {
	o := s.oauth
	if o == nil || o.cfg == nil {
		oauthError(w, http.StatusNotFound, "not_found", "this sink has no OAuth client (loader serve --oauth-client)")
		return
	}
	if o.failLeft.Load() > 0 && o.failLeft.Add(-1) >= 0 {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "sink fault injection: token endpoint unavailable")
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		// RFC 6749 section 2.3.1: the client id and secret are form-encoded before Basic encoding.
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	}
	if !ok || subtle.ConstantTimeCompare([]byte(id), []byte(o.cfg.ClientID)) != 1 ||
		subtle.ConstantTimeCompare([]byte(secret), []byte(o.cfg.ClientSecret)) != 1 {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "Client authentication failed")
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant_type %q, want client_credentials", gt))
		return
	}
	if !strings.Contains(" "+r.PostForm.Get("scope")+" ", " all-apis ") {
		oauthError(w, http.StatusBadRequest, "invalid_scope", "scope must include all-apis")
		return
	}
	var tables []string
	if details := r.PostForm.Get("authorization_details"); details != "" {
		if res := r.PostForm.Get("resource"); !resourceRE.MatchString(res) {
			oauthError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("resource %q, want api://databricks/workspaces/{workspace_id}/zerobusDirectWriteApi", res))
			return
		}
		t, desc := s.checkDetails(r.Context(), details)
		if desc != "" {
			oauthError(w, http.StatusBadRequest, "invalid_request", "authorization_details: "+desc)
			return
		}
		tables = []string{t}
	}
	ttl := (o.cfg.TokenTTL + time.Second - 1).Truncate(time.Second)
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{Tables: tables, RegisteredClaims: jwt.RegisteredClaims{
		// Whole seconds on the wire: round the expiry up, so a token lives at least ttl.
		Subject: o.cfg.ClientID, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl + time.Second - 1).Truncate(time.Second)),
	}}).SignedString(o.key)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	// expires_in is quoted, as some workspaces send it (reference section 3).
	writeJSON(w, http.StatusOK, map[string]string{"access_token": tok, "token_type": "Bearer",
		"expires_in": strconv.Itoa(int(ttl / time.Second)), "scope": "all-apis"})
}

// checkDetails checks the three grants of a Zerobus token request against the warehouse: the table
// must exist, and the details must ask USE CATALOG, USE SCHEMA, and SELECT and MODIFY on it with
// operation zerobuswrite. It returns the table, or why the request is refused.
func (s *Server) checkDetails(ctx context.Context, raw string) (string, string) {
	var ds []authDetail
	if err := json.Unmarshal([]byte(raw), &ds); err != nil {
		return "", "not a JSON array of grants: " + err.Error()
	}
	has := func(list []string, want ...string) bool {
		for _, w := range want {
			found := false
			for _, v := range list {
				found = found || strings.EqualFold(v, w)
			}
			if !found {
				return false
			}
		}
		return true
	}
	var table, catalog, schema string
	for _, d := range ds {
		if d.Type != "unity_catalog_privileges" {
			return "", fmt.Sprintf("type %q, want unity_catalog_privileges", d.Type)
		}
		switch d.ObjectType {
		case "TABLE":
			if !has(d.Privileges, "SELECT", "MODIFY") || !has(d.Operations, "zerobuswrite") {
				return "", fmt.Sprintf("table %s: want privileges SELECT and MODIFY with operations [zerobuswrite]", d.Path)
			}
			table = d.Path
		case "CATALOG":
			if has(d.Privileges, "USE CATALOG") {
				catalog = d.Path
			}
		case "SCHEMA":
			if has(d.Privileges, "USE SCHEMA") {
				schema = d.Path
			}
		}
	}
	name, err := tableschema.ParseTableName(table)
	switch {
	case table == "":
		return "", "no TABLE grant"
	case err != nil:
		return "", err.Error()
	case catalog != name.Catalog:
		return "", fmt.Sprintf("no USE CATALOG on %s", name.Catalog)
	case schema != name.Catalog+"."+name.Schema:
		return "", fmt.Sprintf("no USE SCHEMA on %s.%s", name.Catalog, name.Schema)
	}
	if _, err := s.wh.Table(ctx, name); err != nil {
		return "", fmt.Sprintf("the service principal has no MODIFY and SELECT grant on table %s, or it does not exist (error %s)", name, zerobus.ErrorCodeTableNotGranted)
	}
	return name.String(), ""
}

// parseToken checks a bearer token the sink issued and returns its claims.
func (o *oauthState) parseToken(tok string) (*claims, error) {
	var c claims
	_, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return o.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired())
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// bearer returns the bearer tokens of incoming gRPC metadata.
func bearer(values []string) []string {
	var out []string
	for _, v := range values {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			out = append(out, strings.TrimSpace(tok))
		}
	}
	return out
}

// authorizeOAuth checks a Flight call's token against the OAuth tokens the sink issued: a Zerobus
// DoPut's table must be among the token's tables. ok is false when no issued token was presented
// (the static tokens may still admit the call).
func (s *Server) authorizeOAuth(ctx context.Context, md metadata.MD) (ok bool, err error) {
	var c *claims
	var lastErr error
	for _, tok := range bearer(md.Get(zerobus.HeaderAuthorization)) {
		if c, lastErr = s.oauth.parseToken(tok); lastErr == nil {
			break
		}
	}
	if c == nil {
		if lastErr != nil && errors.Is(lastErr, jwt.ErrTokenExpired) {
			return false, status.Error(codes.Unauthenticated, "the bearer token has expired: mint a new one")
		}
		return false, nil
	}
	vals := md.Get(zerobus.HeaderTableName)
	if len(vals) == 0 {
		return true, nil
	}
	want, perr := tableschema.ParseTableName(strings.TrimSpace(vals[0]))
	if perr != nil {
		return true, nil // the DoPut itself refuses a bad header
	}
	for _, t := range c.Tables {
		if t == want.String() {
			return true, nil
		}
	}
	granted := "no table"
	if len(c.Tables) > 0 {
		granted = strings.Join(c.Tables, ", ")
	}
	return false, zerobus.TableNotGrantedError(fmt.Sprintf(
		"Error %s: the token's authorization_details do not grant table %s (the token is for %s): mint a token for this table, with SELECT and MODIFY granted directly on it",
		zerobus.ErrorCodeTableNotGranted, want, granted))
}

// requireToken checks an HTTP API call's bearer token.
func (s *Server) requireToken(w http.ResponseWriter, r *http.Request) bool {
	if s.oauth.cfg == nil {
		return true
	}
	toks := bearer([]string{r.Header.Get("Authorization")})
	if len(toks) == 1 {
		if _, err := s.oauth.parseToken(toks[0]); err == nil {
			return true
		}
	}
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error_code": "UNAUTHENTICATED", "message": "missing, invalid or expired bearer token"})
	return false
}

// countRE is the one statement the sink's SQL API answers.
var countRE = regexp.MustCompile(`(?i)^\s*SELECT\s+count\s*\(\s*(?:\*|1)\s*\)(?:\s*,\s*max\s*\(\s*` + "`?" + `([A-Za-z0-9_]+)` + "`?" + `\s*\))?\s+FROM\s+([A-Za-z0-9_` + "`" + `.]+)\s*;?\s*$`)

// sqlSubmit is POST /api/2.0/sql/statements: SELECT count(*) FROM catalog.schema.table over the
// committed rows (what a query sees), answered at once.
func (s *Server) sqlSubmit(w http.ResponseWriter, r *http.Request) {
	if !s.requireToken(w, r) {
		return
	}
	var req struct {
		WarehouseID string `json:"warehouse_id"`
		Statement   string `json:"statement"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error_code": "INVALID_PARAMETER_VALUE", "message": err.Error()})
		return
	}
	if req.WarehouseID == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error_code": "INVALID_PARAMETER_VALUE", "message": "warehouse_id is required"})
		return
	}
	id := fmt.Sprintf("sink-%d", s.oauth.seq.Add(1))
	res := map[string]any{"statement_id": id}
	m := countRE.FindStringSubmatch(req.Statement)
	name, err := tableschema.TableName{}, error(nil)
	if m != nil {
		name, err = tableschema.ParseTableName(strings.ReplaceAll(m[2], "`", ""))
	}
	switch {
	case m == nil:
		res["status"] = map[string]any{"state": "FAILED", "error": map[string]string{"error_code": "NOT_IMPLEMENTED",
			"message": "the sink answers only SELECT count(*) [, max(col)] FROM catalog.schema.table"}}
	case err != nil:
		res["status"] = map[string]any{"state": "FAILED", "error": map[string]string{"error_code": "BAD_REQUEST", "message": err.Error()}}
	default:
		n, cerr := s.committedRows(r.Context(), name)
		row := []*string{ptr(strconv.FormatInt(n, 10))}
		cols := []map[string]any{{"name": "count(1)", "type_name": "LONG", "position": 0}}
		if cerr == nil && m[1] != "" {
			var mx *string
			mx, cerr = s.committedMax(r.Context(), name, m[1])
			row = append(row, mx)
			cols = append(cols, map[string]any{"name": "max(" + m[1] + ")", "type_name": "STRING", "position": 1})
		}
		if cerr != nil {
			res["status"] = map[string]any{"state": "FAILED", "error": map[string]string{"error_code": "BAD_REQUEST", "message": cerr.Error()}}
		} else {
			res["status"] = map[string]string{"state": "SUCCEEDED"}
			res["manifest"] = map[string]any{"format": "JSON_ARRAY", "schema": map[string]any{"column_count": len(cols),
				"columns": cols}, "total_row_count": 1}
			res["result"] = map[string]any{"row_count": 1, "data_array": [][]*string{row}}
		}
	}
	body, _ := json.Marshal(res)
	s.oauth.mu.Lock()
	s.oauth.stmts[id] = statementResult{body: body}
	s.oauth.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// sqlGet is GET /api/2.0/sql/statements/{id}.
func (s *Server) sqlGet(w http.ResponseWriter, r *http.Request) {
	if !s.requireToken(w, r) {
		return
	}
	s.oauth.mu.Lock()
	res, ok := s.oauth.stmts[r.PathValue("id")]
	s.oauth.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such statement"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(res.body)
}

// committedRows counts the rows committed to the table's Delta log: what a query sees, without the
// rows acknowledged but not yet committed.
func (s *Server) committedRows(ctx context.Context, name tableschema.TableName) (int64, error) {
	t, err := s.wh.Table(ctx, name)
	if err != nil {
		return 0, err
	}
	n, _, err := t.Count(ctx)
	return n, err
}

// standIn makes a sink with OAuth answer Zerobus calls as the service does: the service has no
// actions (describe, count, flush), so a DoAction carrying the Zerobus table header is Unimplemented.
// Counting then goes through the SQL Statement API, which sees committed rows only.
func (s *Server) standIn(ctx context.Context, method string) error {
	if s.oauth == nil || s.oauth.cfg == nil || method != "/arrow.flight.protocol.FlightService/DoAction" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(zerobus.HeaderTableName)) == 0 {
		return nil
	}
	return status.Error(codes.Unimplemented, "the Zerobus service has no actions: describe the table in Unity Catalog and count it through a SQL warehouse")
}

func ptr(s string) *string { return &s }
