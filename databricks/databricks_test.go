package databricks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loaderproject/loader/databricks"
	"github.com/loaderproject/loader/tableschema"
)

var events = tableschema.TableName{Catalog: "main", Schema: "sales", Table: "events"}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadCredentials(t *testing.T) {
	home := t.TempDir()
	cfg := "[DEFAULT]\nhost = default.cloud.databricks.com\nclient_id = d-id\nclient_secret = d-secret\n\n" +
		"[prod]\nhost = https://prod.cloud.databricks.com/\nclient_id = p-id\nclient_secret = p-secret\nwarehouse_id = wh9\n\n" +
		"[partial]\nhost = https://x.cloud.databricks.com\n"
	if err := os.WriteFile(filepath.Join(home, ".databrickscfg"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	full := map[string]string{databricks.EnvClientID: "e-id", databricks.EnvClientSecret: "e-secret", databricks.EnvHost: "env.cloud.databricks.com"}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		profile string
		wantID  string
		wantURL string
		wantWH  string
	}{
		{"environment wins without a profile", full, "", "e-id", "https://env.cloud.databricks.com", ""},
		{"DATABRICKS_WORKSPACE_URL before DATABRICKS_HOST", map[string]string{databricks.EnvClientID: "e", databricks.EnvClientSecret: "s-9f3k",
			databricks.EnvHost: "h.example", databricks.EnvWorkspaceURL: "https://w.example"}, "", "e", "https://w.example", ""},
		{"a named profile wins over the environment", full, "prod", "p-id", "https://prod.cloud.databricks.com", "wh9"},
		{"DATABRICKS_CONFIG_PROFILE names it", map[string]string{databricks.EnvConfigProfile: "prod"}, "", "p-id", "https://prod.cloud.databricks.com", "wh9"},
		{"the DEFAULT profile last", map[string]string{}, "", "d-id", "https://default.cloud.databricks.com", ""},
		{"a partial profile takes the rest from the environment", full, "partial", "e-id", "https://x.cloud.databricks.com", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := databricks.LoadCredentials(envOf(tc.env), home, tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			if c.ClientID != tc.wantID || c.WorkspaceURL != tc.wantURL || c.WarehouseID != tc.wantWH || c.ClientSecret == "" {
				t.Errorf("got %s, warehouse %q; want id %q at %q, warehouse %q", c, c.WarehouseID, tc.wantID, tc.wantURL, tc.wantWH)
			}
			if strings.Contains(c.String(), c.ClientSecret) {
				t.Errorf("String() shows the secret: %s", c)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		_, err := databricks.LoadCredentials(envOf(nil), t.TempDir(), "")
		if !errors.Is(err, databricks.ErrNoCredentials) {
			t.Errorf("nothing anywhere: %v; want ErrNoCredentials", err)
		}
		_, err = databricks.LoadCredentials(envOf(map[string]string{databricks.EnvClientID: "x"}), t.TempDir(), "")
		if !errors.Is(err, databricks.ErrNoCredentials) || !strings.Contains(err.Error(), databricks.EnvClientSecret) {
			t.Errorf("no secret: %v; want ErrNoCredentials naming %s", err, databricks.EnvClientSecret)
		}
		var pe *databricks.ProfileError
		_, err = databricks.LoadCredentials(envOf(nil), home, "nosuch")
		if !errors.As(err, &pe) || pe.Profile != "nosuch" {
			t.Errorf("missing profile: %v; want a *ProfileError naming it", err)
		}
		_, err = databricks.LoadCredentials(envOf(nil), home, "partial")
		if !errors.As(err, &pe) || strings.Join(pe.Missing, ",") != "client_id,client_secret" {
			t.Errorf("partial profile: %v; want the missing keys client_id, client_secret", err)
		}
	})
}

func TestWorkspaceID(t *testing.T) {
	for in, want := range map[string]string{
		"https://1234567890123456.zerobus.us-west-2.cloud.databricks.com": "1234567890123456",
		"987.zerobus.eastus.azuredatabricks.net:443":                      "987",
	} {
		if got, err := databricks.WorkspaceID(in); err != nil || got != want {
			t.Errorf("WorkspaceID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// tokenServer is an OIDC token endpoint that answers with scripted statuses, then tokens.
type tokenServer struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int // answered first, one per request
	forms    []url.Values
	minted   atomic.Int64
}

func newTokenServer(t *testing.T, statuses ...int) *tokenServer {
	ts := &tokenServer{statuses: statuses}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		_ = r.ParseForm()
		ts.mu.Lock()
		ts.forms = append(ts.forms, r.PostForm)
		var status int
		if len(ts.statuses) > 0 {
			status, ts.statuses = ts.statuses[0], ts.statuses[1:]
		}
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case status == http.StatusServiceUnavailable:
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`<html>upstream unavailable</html>`))
		case status != 0:
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request", "error_description": "authorization_details: no grant"})
		case !ok || id != "id" || secret != "secret":
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "Client authentication failed"})
		default:
			n := ts.minted.Add(1)
			// A quoted expires_in, as some workspaces send it.
			_, _ = w.Write([]byte(`{"access_token":"tok-` + string(rune('0'+n)) + `","token_type":"Bearer","expires_in":"3600"}`))
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func newTokens(url, secret string) *databricks.Tokens {
	return databricks.NewTokens(databricks.TokenConfig{WorkspaceID: "42", Backoff: time.Millisecond,
		Credentials: databricks.Credentials{ClientID: "id", ClientSecret: secret, WorkspaceURL: url}})
}

func TestTokensCacheRefreshAndInvalidate(t *testing.T) {
	srv := newTokenServer(t)
	toks := newTokens(srv.URL, "secret")
	now := time.Now()
	toks.SetClock(func() time.Time { return now })
	ctx := context.Background()
	first, err := toks.Token(ctx, events)
	if err != nil {
		t.Fatal(err)
	}
	form := srv.forms[0]
	if form.Get("grant_type") != "client_credentials" || form.Get("scope") != "all-apis" ||
		form.Get("resource") != "api://databricks/workspaces/42/zerobusDirectWriteApi" {
		t.Errorf("form %v", form)
	}
	var details []map[string]any
	if err := json.Unmarshal([]byte(form.Get("authorization_details")), &details); err != nil || len(details) != 3 {
		t.Fatalf("authorization_details %q: %v", form.Get("authorization_details"), err)
	}
	if details[2]["object_full_path"] != "main.sales.events" || details[2]["object_type"] != "TABLE" ||
		len(details[2]["privileges"].([]any)) != 2 || details[2]["operations"].([]any)[0] != "zerobuswrite" {
		t.Errorf("table grant %v", details[2])
	}
	// Cached until 5 minutes before it expires (a 3600 s token).
	now = now.Add(54 * time.Minute)
	if again, _ := toks.Token(ctx, events); again != first || srv.minted.Load() != 1 {
		t.Errorf("a fresh token was not reused (%d mints)", srv.minted.Load())
	}
	now = now.Add(2 * time.Minute)
	if second, _ := toks.Token(ctx, events); second == first || srv.minted.Load() != 2 {
		t.Errorf("a token 4 minutes from expiry was reused (%d mints)", srv.minted.Load())
	}
	// Per table.
	other := events
	other.Table = "other"
	if _, err := toks.Token(ctx, other); err != nil || srv.minted.Load() != 3 || toks.Mints(events) != 2 || toks.Mints(other) != 1 {
		t.Errorf("another table: %v, %d mints", err, srv.minted.Load())
	}
	toks.Invalidate(events)
	if _, err := toks.Token(ctx, events); err != nil || toks.Mints(events) != 3 {
		t.Errorf("after Invalidate: %v, %d mints for the table; want 3", err, toks.Mints(events))
	}
}

func TestTokenErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("wrong secret: fatal at once, names the credentials, quotes the endpoint", func(t *testing.T) {
		srv := newTokenServer(t)
		_, err := newTokens(srv.URL, "bad-9f3k").Token(ctx, events)
		var te *databricks.TokenError
		if !errors.As(err, &te) || te.StatusCode != 401 || te.Retryable() || te.Likely() != databricks.LikelyCredentials ||
			!strings.Contains(err.Error(), `"Client authentication failed"`) || len(srv.forms) != 1 {
			t.Errorf("%v (%d requests); want one 401 naming the client id or secret", err, len(srv.forms))
		}
		if strings.Contains(err.Error(), "bad-9f3k") {
			t.Errorf("the error shows the secret: %v", err)
		}
	})
	t.Run("400 names the grants", func(t *testing.T) {
		srv := newTokenServer(t, http.StatusBadRequest)
		_, err := newTokens(srv.URL, "secret").Token(ctx, events)
		var te *databricks.TokenError
		if !errors.As(err, &te) || te.Likely() != databricks.LikelyGrants || !strings.Contains(err.Error(), "ALL PRIVILEGES is not enough") {
			t.Errorf("%v; want the grants named", err)
		}
	})
	t.Run("5xx is retried with backoff", func(t *testing.T) {
		srv := newTokenServer(t, 503, 503)
		if _, err := newTokens(srv.URL, "secret").Token(ctx, events); err != nil || len(srv.forms) != 3 {
			t.Errorf("%v after %d requests; want success on the third", err, len(srv.forms))
		}
		srv = newTokenServer(t, 503, 503, 503, 503, 503, 503)
		_, err := newTokens(srv.URL, "secret").Token(ctx, events)
		var te *databricks.TokenError
		if !errors.As(err, &te) || te.StatusCode != 503 || len(srv.forms) != 1+databricks.DefaultTokenRetries ||
			!strings.Contains(err.Error(), "upstream unavailable") {
			t.Errorf("%v after %d requests; want a 503 after %d", err, len(srv.forms), 1+databricks.DefaultTokenRetries)
		}
	})
	t.Run("a cancelled context", func(t *testing.T) {
		srv := newTokenServer(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := newTokens(srv.URL, "secret").Token(cctx, events); !errors.Is(err, context.Canceled) {
			t.Errorf("%v; want context.Canceled", err)
		}
	})
}
