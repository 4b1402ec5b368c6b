package warehouse

import (
	"math/big"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/loaderproject/loader/tableschema"
)

// TestDecimalRoundTrip: text the check accepts (tableschema.ParseDecimal, plain syntax) is
// rendered back by appendDecimal, as a scan does, in canonical form.
func TestDecimalRoundTrip(t *testing.T) {
	tests := []struct {
		in   string
		p, s int
		want string
	}{
		{"19.99", 10, 2, "19.99"},
		{"-0.5", 10, 2, "-0.50"},
		{"+7", 5, 0, "7"},
		{"-0", 3, 1, "0.0"},
		{".25", 3, 2, "0.25"},
		{"3.", 3, 2, "3.00"},
		{"0001.2300", 3, 2, "1.23"},
		{"99999999999999999999999999999999999999", 38, 0, "99999999999999999999999999999999999999"},
		{"-9999999999999999999.9999999999999999999", 38, 19, "-9999999999999999999.9999999999999999999"},
		{"0.00000000000000000000000000000000000001", 38, 38, "0.00000000000000000000000000000000000001"},
		{"12345678901234567890", 38, 18, "12345678901234567890.000000000000000000"},
	}
	for _, tt := range tests {
		n, err := tableschema.ParseDecimal(tt.in, tt.p, tt.s, tableschema.DecimalPlain)
		if err != nil {
			t.Errorf("ParseDecimal(%q, %d, %d) = %v", tt.in, tt.p, tt.s, err)
			continue
		}
		if got := string(appendDecimal(nil, n, tt.s)); got != tt.want {
			t.Errorf("appendDecimal(ParseDecimal(%q, %d, %d)) = %s; want %s", tt.in, tt.p, tt.s, got, tt.want)
		}
	}
}

func TestAppendDecimalMatchesToString(t *testing.T) {
	vals := []string{"0", "1", "-1", "9", "10", "18446744073709551615", "18446744073709551616", "-18446744073709551616",
		"99999999999999999999999999999999999999", "-99999999999999999999999999999999999999", "10000000000000000000",
		"1000000000000000000000000000000000000"}
	for _, v := range vals {
		b, _ := new(big.Int).SetString(v, 10)
		n := decimal128.FromBigInt(b)
		for _, s := range []int{0, 1, 2, 5, 19, 20, 37, 38} {
			if got, want := string(appendDecimal(nil, n, s)), n.ToString(int32(s)); got != want {
				t.Errorf("appendDecimal(%s, %d) = %s; want %s", v, s, got, want)
			}
		}
	}
}
