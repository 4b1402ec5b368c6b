package databricks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/loaderproject/loader/tableschema"
)

// Token refresh and retry defaults, after the Rust SDK (reference section 3).
const (
	// DefaultRefreshBefore is how long before its expiry a cached token is replaced (the SDK's
	// token_refresh_buffer). For tokens that live less than twice this, half their lifetime is used.
	DefaultRefreshBefore = 5 * time.Minute
	// DefaultTokenRetries is how many times a mint that failed with a 5xx or a network error is
	// tried again.
	DefaultTokenRetries = 4
	// DefaultTokenBackoff is the wait before the first retry; it doubles on each retry up to
	// DefaultTokenBackoffMax.
	DefaultTokenBackoff    = 500 * time.Millisecond
	DefaultTokenBackoffMax = 8 * time.Second
)

// TokenConfig configures Tokens.
type TokenConfig struct {
	Credentials Credentials
	// WorkspaceID goes into the token's resource (api://databricks/workspaces/{id}/zerobusDirectWriteApi);
	// see WorkspaceID.
	WorkspaceID string
	// HTTPClient makes the token requests (its transport carries TLS roots and the proxy). Default
	// http.DefaultClient.
	HTTPClient *http.Client
	// Logger gets one debug line per mint (table, expiry; never the token). Default: discard.
	Logger *slog.Logger
	// Retries, Backoff and BackoffMax bound the retries of a mint after a 5xx or a network error.
	// Zero values take the defaults; negative Retries means none.
	Retries             int
	Backoff, BackoffMax time.Duration
	// RefreshBefore replaces DefaultRefreshBefore when positive.
	RefreshBefore time.Duration
}

// Tokens mints and caches OAuth tokens, one per table for Zerobus and one for the workspace's REST
// APIs. It is safe for concurrent use.
type Tokens struct {
	cfg TokenConfig
	log *slog.Logger
	now func() time.Time // time.Now; tests move it

	mu     sync.Mutex
	tables map[tableschema.TableName]*cached
	ws     *cached
}

// cached is one cached token; its mutex is held during a mint so concurrent callers share it.
type cached struct {
	mu     sync.Mutex
	token  string
	expiry time.Time
	life   time.Duration
	mints  int
}

// NewTokens returns a token cache for the credentials. It does no I/O.
func NewTokens(cfg TokenConfig) *Tokens {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.Retries == 0:
		cfg.Retries = DefaultTokenRetries
	case cfg.Retries < 0:
		cfg.Retries = 0
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultTokenBackoff
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultTokenBackoffMax
	}
	if cfg.RefreshBefore <= 0 {
		cfg.RefreshBefore = DefaultRefreshBefore
	}
	return &Tokens{cfg: cfg, log: cfg.Logger, now: time.Now, tables: map[tableschema.TableName]*cached{}, ws: &cached{}}
}

// TokenURL is the workspace's OIDC token endpoint.
func (t *Tokens) TokenURL() string { return t.cfg.Credentials.WorkspaceURL + "/oidc/v1/token" }

// Token returns a token for writing to table through Zerobus: a cached one while it is fresh, else
// a new one. The error is a *TokenError when the token endpoint refused (4xx, or 5xx after the
// retries).
func (t *Tokens) Token(ctx context.Context, table tableschema.TableName) (string, error) {
	t.mu.Lock()
	c := t.tables[table]
	if c == nil {
		c = &cached{}
		t.tables[table] = c
	}
	t.mu.Unlock()
	return t.get(ctx, c, table)
}

// Invalidate drops the cached token of table, so the next Token mints a new one (after the server
// refused it).
func (t *Tokens) Invalidate(table tableschema.TableName) {
	t.mu.Lock()
	c := t.tables[table]
	t.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		c.token, c.expiry = "", time.Time{}
		c.mu.Unlock()
	}
}

// WorkspaceToken returns a token for the workspace's REST APIs (scope all-apis, no table grants),
// for the SQL Statement Execution API.
func (t *Tokens) WorkspaceToken(ctx context.Context) (string, error) {
	return t.get(ctx, t.ws, tableschema.TableName{})
}

// Mints returns how many tokens were minted for table (for tests and diagnostics).
func (t *Tokens) Mints(table tableschema.TableName) int {
	t.mu.Lock()
	c := t.tables[table]
	t.mu.Unlock()
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mints
}

func (t *Tokens) get(ctx context.Context, c *cached, table tableschema.TableName) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := t.now()
	if c.token != "" && now.Before(c.expiry.Add(-refreshBefore(c.life, t.cfg.RefreshBefore))) {
		return c.token, nil
	}
	start := time.Now()
	tok, err := t.mint(ctx, table)
	if err != nil {
		if c.token != "" && t.now().Before(c.expiry) {
			// As the SDK does: a refresh that fails falls back to the still-valid cached token.
			t.log.Warn("refreshing the token failed; using the cached one until it expires", "table", table.String(), "expires", c.expiry, "err", err)
			return c.token, nil
		}
		return "", err
	}
	// The lifetime is anchored at the request's start, as the SDK does.
	life := time.Duration(tok.ExpiresIn) * time.Second
	if life <= 0 {
		life = tok.Expiry.Sub(start)
	}
	c.token, c.expiry, c.life = tok.AccessToken, now.Add(life), life
	c.mints++
	what := "workspace"
	if table.Table != "" {
		what = table.String()
	}
	t.log.Debug("minted an OAuth token", "for", what, "expires", tok.Expiry.Format(time.RFC3339), "lifetime", life.Round(time.Second))
	return c.token, nil
}

// refreshBefore is how long before expiry a token of the given lifetime is replaced.
func refreshBefore(life, buffer time.Duration) time.Duration {
	if life > 0 && life < 2*buffer {
		return life / 2
	}
	return buffer
}

// mint asks the token endpoint, retrying 5xx answers and network errors with backoff.
func (t *Tokens) mint(ctx context.Context, table tableschema.TableName) (*oauth2.Token, error) {
	cc := clientcredentials.Config{
		ClientID:       t.cfg.Credentials.ClientID,
		ClientSecret:   t.cfg.Credentials.ClientSecret,
		TokenURL:       t.TokenURL(),
		Scopes:         []string{"all-apis"},
		AuthStyle:      oauth2.AuthStyleInHeader,
		EndpointParams: url.Values{},
	}
	if table.Table != "" {
		cc.EndpointParams.Set("resource", "api://databricks/workspaces/"+t.cfg.WorkspaceID+"/zerobusDirectWriteApi")
		cc.EndpointParams.Set("authorization_details", AuthorizationDetails(table))
	}
	hctx := context.WithValue(ctx, oauth2.HTTPClient, t.cfg.HTTPClient)
	wait := t.cfg.Backoff
	for attempt := 0; ; attempt++ {
		tok, err := cc.Token(hctx)
		if err == nil {
			if tok.AccessToken == "" {
				return nil, &TokenError{Endpoint: cc.TokenURL, Table: table.String(), Description: "the answer has no access_token"}
			}
			return tok, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		terr := newTokenError(cc.TokenURL, table, err)
		if !terr.Retryable() || attempt >= t.cfg.Retries {
			return nil, terr
		}
		t.log.Warn("the token endpoint failed; retrying", "attempt", attempt+1, "backoff", wait, "err", terr)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
		wait = min(2*wait, t.cfg.BackoffMax)
	}
}

// AuthorizationDetails is the authorization_details form value for writing to table: USE CATALOG,
// USE SCHEMA, and SELECT and MODIFY on the table with operations ["zerobuswrite"].
func AuthorizationDetails(table tableschema.TableName) string {
	type detail struct {
		Type       string   `json:"type"`
		Privileges []string `json:"privileges"`
		ObjectType string   `json:"object_type"`
		Path       string   `json:"object_full_path"`
		Operations []string `json:"operations,omitempty"`
	}
	const uc = "unity_catalog_privileges"
	b, _ := json.Marshal([]detail{
		{Type: uc, Privileges: []string{"USE CATALOG"}, ObjectType: "CATALOG", Path: table.Catalog},
		{Type: uc, Privileges: []string{"USE SCHEMA"}, ObjectType: "SCHEMA", Path: table.Catalog + "." + table.Schema},
		{Type: uc, Privileges: []string{"SELECT", "MODIFY"}, ObjectType: "TABLE", Path: table.String(), Operations: []string{"zerobuswrite"}},
	})
	return string(b)
}

// Likely culprits of a refused token request.
const (
	LikelyCredentials = "the client id or the client secret is likely wrong"
	LikelyGrants      = "the grants are likely missing: the service principal needs USE CATALOG on the catalog, USE SCHEMA on the schema, and SELECT and MODIFY directly on the table (ALL PRIVILEGES is not enough)"
	LikelyWorkspace   = "the workspace URL is likely wrong: it has no OIDC token endpoint"
)

// TokenError is a failed token request: the endpoint refused (HTTP status and its own error text),
// or could not be reached.
type TokenError struct {
	Endpoint    string
	Table       string // "" for a workspace token
	StatusCode  int    // 0 when no HTTP answer came
	Code        string // the OAuth "error", e.g. invalid_client
	Description string // the OAuth "error_description", or the start of the body
	Err         error  // the transport error when there was no answer
}

// Likely says which of the client id, the secret or the grants is likely wrong, or "" when the
// failure is not the caller's (5xx, network).
func (e *TokenError) Likely() string {
	switch {
	case e.StatusCode == http.StatusNotFound:
		return LikelyWorkspace
	case e.StatusCode == http.StatusUnauthorized, e.Code == "invalid_client", e.Code == "unauthorized_client":
		return LikelyCredentials
	case e.StatusCode >= 400 && e.StatusCode < 500:
		return LikelyGrants
	}
	return ""
}

// Retryable reports whether another attempt may succeed: a 5xx, a 429 or a network error, but not a
// certificate that failed verification.
func (e *TokenError) Retryable() bool {
	if e.StatusCode == 0 {
		var cv *tls.CertificateVerificationError
		var ua x509.UnknownAuthorityError
		var hn x509.HostnameError
		var ci x509.CertificateInvalidError
		var dns *net.DNSError
		if errors.As(e.Err, &dns) && dns.IsNotFound {
			return false // a host that does not exist will not appear
		}
		return e.Err != nil && !errors.As(e.Err, &cv) && !errors.As(e.Err, &ua) && !errors.As(e.Err, &hn) && !errors.As(e.Err, &ci)
	}
	return e.StatusCode >= 500 || e.StatusCode == http.StatusTooManyRequests
}

func (e *TokenError) Error() string {
	var b strings.Builder
	b.WriteString("token endpoint " + e.Endpoint)
	if e.Table != "" {
		b.WriteString(" (token for " + e.Table + ")")
	}
	if e.StatusCode == 0 {
		if e.Err != nil {
			b.WriteString(": " + e.Err.Error())
		} else {
			b.WriteString(": " + e.Description)
		}
		return b.String()
	}
	fmt.Fprintf(&b, " answered HTTP %d", e.StatusCode)
	if e.Code != "" || e.Description != "" {
		b.WriteString(": ")
		b.WriteString(strings.TrimSpace(e.Code + " " + quote(e.Description)))
	}
	if l := e.Likely(); l != "" {
		b.WriteString("; " + l)
	}
	return b.String()
}

func quote(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("%q", s)
}

// Unwrap returns the transport error.
func (e *TokenError) Unwrap() error { return e.Err }

func newTokenError(endpoint string, table tableschema.TableName, err error) *TokenError {
	te := &TokenError{Endpoint: endpoint}
	if table.Table != "" {
		te.Table = table.String()
	}
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response == nil {
		te.Err = unwrapURL(err)
		return te
	}
	te.StatusCode = re.Response.StatusCode
	te.Code, te.Description = re.ErrorCode, re.ErrorDescription
	if te.Code == "" && te.Description == "" {
		body := strings.TrimSpace(string(re.Body))
		if len(body) > 300 {
			body = body[:300] + "..."
		}
		te.Description = body
	}
	return te
}

// unwrapURL drops the *url.Error layer, whose text repeats the endpoint.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
