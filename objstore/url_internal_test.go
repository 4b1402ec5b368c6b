package objstore

import (
	"fmt"
	"testing"
)

func TestParseAndPathStyle(t *testing.T) {
	l, err := Parse("s3://b/some/key.parquet?endpoint=http://127.0.0.1:9000&use_path_style=true")
	if err != nil || l.Bucket != "b" || l.Key != "some/key.parquet" || l.Query.Get("endpoint") != "http://127.0.0.1:9000" {
		t.Fatalf("Parse = %+v, %v", l, err)
	}
	if l.String() != "s3://b/some/key.parquet" {
		t.Errorf("String = %q; want the URL without its query", l.String())
	}
	if _, err := Parse("s3:///k"); err == nil {
		t.Error("a URL without a bucket parsed")
	}
	for ep, want := range map[string]bool{"http://127.0.0.1:9000": true, "http://localhost:9000": true, "http://[::1]:9000": true,
		"https://s3.example.com": false, "https://acct.r2.cloudflarestorage.com": false} {
		if got := pathStyleHost(ep); got != want {
			t.Errorf("pathStyleHost(%s) = %v; want %v", ep, got, want)
		}
	}
}

func TestMergeRanges(t *testing.T) {
	for _, c := range []struct {
		in   []Range
		gap  int64
		want string
	}{
		{[]Range{{10, 5}, {0, 10}}, 0, "[{0 15}]"},
		{[]Range{{0, 10}, {20, 5}}, 0, "[{0 10} {20 5}]"},
		{[]Range{{0, 10}, {20, 5}}, 10, "[{0 25}]"},
		{[]Range{{0, 10}, {5, 2}}, 0, "[{0 10}]"},
		{[]Range{{90, 50}, {-1, 3}, {200, 1}}, 0, "[{90 10}]"}, // cut at the size, bad ones dropped
	} {
		if got := fmt.Sprint(mergeRanges(c.in, c.gap, 100)); got != c.want {
			t.Errorf("mergeRanges(%v, %d) = %s; want %s", c.in, c.gap, got, c.want)
		}
	}
}

func TestErrorTextHasNoQuery(t *testing.T) {
	e := &Error{URL: "azblob://c/k", Op: "read", Err: fmt.Errorf("GET https://acct.blob.core.windows.net/c/k?sv=2020&sig=SECRET failed")}
	if s := e.Error(); s != "azblob://c/k: read: GET https://acct.blob.core.windows.net/c/k?… failed" {
		t.Errorf("Error() = %q", s)
	}
}
