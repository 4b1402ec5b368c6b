package sink

import (
	"slices"
	"strconv"
	"testing"

	"github.com/loaderproject/loader/warehouse"
)

func TestUnitTxnsRoundTrip(t *testing.T) {
	txns := unitTxns(map[string][]unitRange{
		"abc.e0.3": {{100, 200}, {0, 100}, {300, 400}},
		"x@y.e1.0": {{5, 6}},
	})
	want := []warehouse.Txn{
		{AppID: "loader-unit:abc.e0.3@0", Version: 200},
		{AppID: "loader-unit:abc.e0.3@300", Version: 400},
		{AppID: "loader-unit:x@y.e1.0@5", Version: 6},
	}
	if !slices.Equal(txns, want) {
		t.Fatalf("unitTxns = %v; want %v", txns, want)
	}
	for _, tx := range txns {
		unit, r, ok := parseUnitTxn(tx.AppID, tx.Version)
		if !ok || unitAppPrefix+unit+"@"+strconv.FormatInt(r.From, 10) != tx.AppID || r.To != tx.Version {
			t.Errorf("parseUnitTxn(%q, %d) = %q, %v, %v", tx.AppID, tx.Version, unit, r, ok)
		}
	}
	for _, bad := range []struct {
		app string
		v   int64
	}{{"loader-sink-wal", 5}, {"loader-unit:u@x", 5}, {"loader-unit:u@9", 5}, {"loader-unit:@0", 5}} {
		if _, _, ok := parseUnitTxn(bad.app, bad.v); ok {
			t.Errorf("parseUnitTxn(%q, %d) accepted", bad.app, bad.v)
		}
	}
}

func TestParseUnitMetaChecksRows(t *testing.T) {
	meta := unitMetaBytes("u", 10, []unitRange{{10, 20}, {30, 35}})
	m, ok, err := parseUnitMeta(meta, 15)
	if err != nil || !ok || m.Unit != "u" || m.From != 10 || len(m.Keep) != 2 {
		t.Fatalf("parseUnitMeta = %+v, %v, %v", m, ok, err)
	}
	if _, _, err := parseUnitMeta(meta, 16); err == nil {
		t.Error("a record whose row count differs from its kept ranges was accepted")
	}
	if _, ok, err := parseUnitMeta(nil, 5); ok || err != nil {
		t.Errorf("empty meta: %v, %v; want untagged", ok, err)
	}
}
