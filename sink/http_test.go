package sink_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// details is a token request's authorization_details for table, without the grants left out.
func details(table string, skip ...string) string {
	n, _ := tableschema.ParseTableName(table)
	all := map[string]map[string]any{
		"CATALOG": {"type": "unity_catalog_privileges", "privileges": []string{"USE CATALOG"}, "object_type": "CATALOG", "object_full_path": n.Catalog},
		"SCHEMA":  {"type": "unity_catalog_privileges", "privileges": []string{"USE SCHEMA"}, "object_type": "SCHEMA", "object_full_path": n.Catalog + "." + n.Schema},
		"TABLE": {"type": "unity_catalog_privileges", "privileges": []string{"SELECT", "MODIFY"}, "object_type": "TABLE", "object_full_path": table,
			"operations": []string{"zerobuswrite"}},
	}
	var out []map[string]any
	for _, k := range []string{"CATALOG", "SCHEMA", "TABLE"} {
		if !strings.Contains(strings.Join(skip, ","), k) {
			out = append(out, all[k])
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// tokenRequest posts a token request and returns the status and the JSON answer.
func tokenRequest(t *testing.T, addr, id, secret string, form url.Values) (int, map[string]string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/oidc/v1/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]string
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("answer is not JSON strings: %v", err)
	}
	return res.StatusCode, body
}

func zerobusForm(table string, skip ...string) url.Values {
	return url.Values{"grant_type": {"client_credentials"}, "scope": {"all-apis"},
		"resource": {"api://databricks/workspaces/1/zerobusDirectWriteApi"}, "authorization_details": {details(table, skip...)}}
}

func TestOAuthTokenEndpoint(t *testing.T) {
	e := start(t, "", sink.WithOAuth(sink.OAuth{ClientID: "sp", ClientSecret: "s:e/c r+t", TokenTTL: 90 * time.Second, FailTokenRequests: 1}))
	e.createTable("main.sales.events", "id BIGINT NOT NULL")
	if code, body := tokenRequest(t, e.addr, "sp", "s:e/c r+t", zerobusForm("main.sales.events")); code != http.StatusServiceUnavailable {
		t.Errorf("first request (fault): %d %v; want 503", code, body)
	}
	for _, tc := range []struct {
		name, id, secret string
		form             url.Values
		code             int
		want             string // in error_description (or error)
	}{
		{"granted", "sp", "s:e/c r+t", zerobusForm("main.sales.events"), 200, ""},
		{"workspace token", "sp", "s:e/c r+t", url.Values{"grant_type": {"client_credentials"}, "scope": {"all-apis"}}, 200, ""},
		{"wrong secret", "sp", "nope", zerobusForm("main.sales.events"), 401, "invalid_client"},
		{"unknown client", "other", "s:e/c r+t", zerobusForm("main.sales.events"), 401, "invalid_client"},
		{"grant type", "sp", "s:e/c r+t", url.Values{"grant_type": {"password"}, "scope": {"all-apis"}}, 400, "unsupported_grant_type"},
		{"no all-apis", "sp", "s:e/c r+t", url.Values{"grant_type": {"client_credentials"}, "scope": {"sql"}}, 400, "all-apis"},
		{"no USE SCHEMA", "sp", "s:e/c r+t", zerobusForm("main.sales.events", "SCHEMA"), 400, "USE SCHEMA"},
		{"no table grant", "sp", "s:e/c r+t", zerobusForm("main.sales.events", "TABLE"), 400, "no TABLE grant"},
		{"missing table", "sp", "s:e/c r+t", zerobusForm("main.sales.missing"), 400, "4024"},
		{"bad resource", "sp", "s:e/c r+t", func() url.Values { f := zerobusForm("main.sales.events"); f.Set("resource", "x"); return f }(), 400, "resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := tokenRequest(t, e.addr, tc.id, tc.secret, tc.form)
			if code != tc.code || !strings.Contains(body["error"]+" "+body["error_description"], tc.want) {
				t.Errorf("%d %v; want %d with %q", code, body, tc.code, tc.want)
			}
			if code == 200 && (body["access_token"] == "" || body["expires_in"] != "90" || body["token_type"] != "Bearer") {
				t.Errorf("answer %v; want a bearer token with expires_in \"90\"", body)
			}
		})
	}
}

// TestOAuthScopeOnFlight: a token opens DoPuts into its own table only; another table's gets
// PermissionDenied 4024; a token the sink did not issue is Unauthenticated. The SQL API counts the
// committed rows and their max.
func TestOAuthScopeOnFlight(t *testing.T) {
	e := start(t, "", sink.WithOAuth(sink.OAuth{ClientID: "sp", ClientSecret: "secret"}), sink.WithCommitInterval(time.Hour))
	name, ts := e.createTable("main.sales.events", allTypes)
	e.createTable("main.sales.other", allTypes)
	_, events := tokenRequest(t, e.addr, "sp", "secret", zerobusForm("main.sales.events"))
	_, ws := tokenRequest(t, e.addr, "sp", "secret", url.Values{"grant_type": {"client_credentials"}, "scope": {"all-apis"}})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batch(t, mem, ts.Arrow(), 100, 50)
	defer rec.Release()
	schemaFrame, frames := encode(t, ts.Arrow(), []arrow.RecordBatch{rec})
	ctx := t.Context()

	for _, tc := range []struct {
		name, table, token string
		code               codes.Code
	}{
		{"another table", "main.sales.other", events["access_token"], codes.PermissionDenied},
		{"a workspace token", "main.sales.events", ws["access_token"], codes.PermissionDenied},
		{"not issued here", "main.sales.events", "eyJhbGciOiJIUzI1NiJ9.e30.x", codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := setup(e.zerobus(ctx, tc.table, tc.token), schemaFrame)
			if status.Code(err) != tc.code {
				t.Fatalf("setup = %v; want %v", err, tc.code)
			}
			if tc.code == codes.PermissionDenied && (!zerobus.IsTableNotGranted(err) || !strings.Contains(err.Error(), "4024")) {
				t.Errorf("%v; want error 4024", err)
			}
		})
	}

	st := e.zerobus(ctx, name.String(), events["access_token"])
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatalf("own table: %v", err)
	}
	for i, fd := range frames {
		sendRecv(t, st, i, fd)
	}
	if _, err := drain(st); err != nil {
		t.Fatal(err)
	}
	if err := e.action(withAuth(ctx, events["access_token"]), sinkapi.ActionFlush, []byte(name.String()), nil); err != nil {
		t.Fatalf("flush without the Zerobus header: %v", err)
	}

	sql := func(statement string) map[string]any {
		body := `{"warehouse_id":"w","statement":` + mustJSON(statement) + `}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.addr+"/api/2.0/sql/statements", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ws["access_token"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := sql("SELECT count(*), max(id) FROM main.sales.events")
	data, _ := json.Marshal(got["result"])
	if !strings.Contains(string(data), `[["50","149"]]`) {
		t.Errorf("count and max: %v; want 50 and 149", got)
	}
	if got := sql("DELETE FROM main.sales.events"); !strings.Contains(mustJSON(got["status"]), "FAILED") {
		t.Errorf("another statement: %v; want FAILED", got)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
