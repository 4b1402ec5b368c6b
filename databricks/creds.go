package databricks

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/ini.v1"
)

// Environment variables read by LoadCredentials, as the Databricks SDKs and CLI name them.
const (
	EnvClientID       = "DATABRICKS_CLIENT_ID"
	EnvClientSecret   = "DATABRICKS_CLIENT_SECRET"
	EnvWorkspaceURL   = "DATABRICKS_WORKSPACE_URL"
	EnvHost           = "DATABRICKS_HOST"
	EnvServerEndpoint = "ZEROBUS_SERVER_ENDPOINT"
	EnvWarehouseID    = "DATABRICKS_WAREHOUSE_ID"
	EnvConfigProfile  = "DATABRICKS_CONFIG_PROFILE"
	EnvConfigFile     = "DATABRICKS_CONFIG_FILE"
)

// Credentials are a service principal's OAuth client credentials and where to use them. Its String
// method hides the secret, so a Credentials can be logged.
type Credentials struct {
	ClientID     string
	ClientSecret string
	// WorkspaceURL is https://host of the workspace (the token endpoint and the SQL API live there).
	WorkspaceURL string
	// ServerEndpoint is the Zerobus endpoint, when known (ZEROBUS_SERVER_ENDPOINT).
	ServerEndpoint string
	// WarehouseID is a SQL warehouse for counting, when known (DATABRICKS_WAREHOUSE_ID or the
	// profile's warehouse_id).
	WarehouseID string
	// Source says where the credentials came from: "environment" or "profile NAME in FILE".
	Source string
}

// String describes the credentials without the secret.
func (c Credentials) String() string {
	secret := "unset"
	if c.ClientSecret != "" {
		secret = "set"
	}
	return fmt.Sprintf("client id %q, secret %s, workspace %q (from %s)", c.ClientID, secret, c.WorkspaceURL, c.Source)
}

// Complete reports whether the credentials can mint tokens.
func (c Credentials) Complete() bool {
	return c.ClientID != "" && c.ClientSecret != "" && c.WorkspaceURL != ""
}

// ErrNoCredentials means neither the environment nor a profile holds client credentials.
var ErrNoCredentials = errors.New("no Databricks client credentials")

// ProfileError is a profile that cannot be used: a missing file or section, or missing keys.
type ProfileError struct {
	File, Profile string
	Missing       []string // keys the profile lacks
	Err           error
}

func (e *ProfileError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("Databricks profile %q in %s: %v", e.Profile, e.File, e.Err)
	default:
		return fmt.Sprintf("Databricks profile %q in %s has no %s", e.Profile, e.File, strings.Join(e.Missing, ", "))
	}
}

func (e *ProfileError) Unwrap() error { return e.Err }

// LoadCredentials finds client credentials. getenv reads the environment (os.LookupEnv in
// production); home is the user's home directory (for ~/.databrickscfg; DATABRICKS_CONFIG_FILE
// overrides the file). profile names a profile (empty: DATABRICKS_CONFIG_PROFILE).
//
// A named profile is used as given; keys it lacks are taken from the environment. Without a profile
// name, the environment is used when DATABRICKS_CLIENT_ID is set, else the DEFAULT profile if the
// file has one. The workspace URL is DATABRICKS_WORKSPACE_URL, else DATABRICKS_HOST, else the
// profile's host; "https://" is added when it has no scheme. It returns ErrNoCredentials when
// nothing is found, and a *ProfileError for a profile that cannot be used.
func LoadCredentials(getenv func(string) (string, bool), home, profile string) (Credentials, error) {
	env := func(k string) string {
		v, _ := getenv(k)
		return strings.TrimSpace(v)
	}
	fromEnv := Credentials{
		ClientID:       env(EnvClientID),
		ClientSecret:   env(EnvClientSecret),
		WorkspaceURL:   firstNonEmpty(env(EnvWorkspaceURL), env(EnvHost)),
		ServerEndpoint: env(EnvServerEndpoint),
		WarehouseID:    env(EnvWarehouseID),
		Source:         "environment",
	}
	file := env(EnvConfigFile)
	if file == "" && home != "" {
		file = filepath.Join(home, ".databrickscfg")
	}
	named := profile != ""
	if !named {
		profile = env(EnvConfigProfile)
		named = profile != ""
	}
	var c Credentials
	switch {
	case named:
		p, err := readProfile(file, profile, true)
		if err != nil {
			return Credentials{}, err
		}
		c = merge(p, fromEnv)
	case fromEnv.ClientID != "":
		c = fromEnv
	default:
		p, err := readProfile(file, "DEFAULT", false)
		if err != nil {
			return Credentials{}, err
		}
		if p.ClientID == "" {
			if fromEnv.WorkspaceURL != "" || fromEnv.ClientSecret != "" {
				return Credentials{}, fmt.Errorf("%w: %s is not set", ErrNoCredentials, EnvClientID)
			}
			return Credentials{}, ErrNoCredentials
		}
		c = merge(p, fromEnv)
	}
	var missing []string
	for _, m := range []struct{ v, name string }{{c.ClientID, "client_id"}, {c.ClientSecret, "client_secret"}, {c.WorkspaceURL, "host"}} {
		if m.v == "" {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		if c.Source == "environment" {
			return Credentials{}, fmt.Errorf("%w: the environment lacks %s", ErrNoCredentials, envNames(missing))
		}
		return Credentials{}, &ProfileError{File: file, Profile: profile, Missing: missing}
	}
	u, err := NormalizeURL(c.WorkspaceURL)
	if err != nil {
		return Credentials{}, fmt.Errorf("workspace URL (%s): %w", c.Source, err)
	}
	c.WorkspaceURL = u
	return c, nil
}

func envNames(keys []string) string {
	names := map[string]string{"client_id": EnvClientID, "client_secret": EnvClientSecret, "host": EnvWorkspaceURL + " or " + EnvHost}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = names[k]
	}
	return strings.Join(out, ", ")
}

// readProfile reads one section of a Databricks CLI config file. With required false, a missing
// file or section is an empty profile.
func readProfile(file, name string, required bool) (Credentials, error) {
	c := Credentials{Source: fmt.Sprintf("profile %s in %s", name, file)}
	if file == "" {
		if required {
			return c, &ProfileError{File: "~/.databrickscfg", Profile: name, Err: errors.New("no home directory")}
		}
		return c, nil
	}
	if _, err := os.Stat(file); err != nil {
		if !required && errors.Is(err, os.ErrNotExist) {
			return c, nil
		}
		return c, &ProfileError{File: file, Profile: name, Err: err}
	}
	f, err := ini.Load(file)
	if err != nil {
		return c, &ProfileError{File: file, Profile: name, Err: err}
	}
	sec, err := f.GetSection(name)
	if err != nil {
		if !required {
			return c, nil
		}
		return c, &ProfileError{File: file, Profile: name, Err: errors.New("no such profile")}
	}
	key := func(k string) string { return strings.TrimSpace(sec.Key(k).String()) }
	c.ClientID, c.ClientSecret, c.WorkspaceURL = key("client_id"), key("client_secret"), key("host")
	c.WarehouseID = key("warehouse_id")
	return c, nil
}

// merge fills p's empty fields from env.
func merge(p, env Credentials) Credentials {
	p.ClientID = firstNonEmpty(p.ClientID, env.ClientID)
	p.ClientSecret = firstNonEmpty(p.ClientSecret, env.ClientSecret)
	p.WorkspaceURL = firstNonEmpty(p.WorkspaceURL, env.WorkspaceURL)
	p.ServerEndpoint = firstNonEmpty(p.ServerEndpoint, env.ServerEndpoint)
	p.WarehouseID = firstNonEmpty(p.WarehouseID, env.WarehouseID)
	return p
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// NormalizeURL returns https://host[:port] for a workspace URL or host, adding "https://" when there
// is no scheme and dropping a trailing slash. Plain http:// is kept (test servers).
func NormalizeURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", fmt.Errorf("%q: want an https:// URL", s)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q: no host", s)
	}
	return u.Scheme + "://" + u.Host, nil
}

// WorkspaceID is the first DNS label of a Zerobus endpoint's host, as the SDKs derive it:
// "1234567890123456" for https://1234567890123456.zerobus.us-west-2.cloud.databricks.com.
func WorkspaceID(endpoint string) (string, error) {
	s := endpoint
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	host := u.Hostname()
	label, _, _ := strings.Cut(host, ".")
	if label == "" {
		return "", fmt.Errorf("endpoint %q: no host to take the workspace id from", endpoint)
	}
	return label, nil
}
