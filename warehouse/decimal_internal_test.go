package warehouse

import (
	"math/big"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		in         string
		p, s       int
		want       string // canonical text at scale s, or "" for a problem
		wantProblm decimalProblem
	}{
		{"19.99", 10, 2, "19.99", decimalOK},
		{"-0.5", 10, 2, "-0.50", decimalOK},
		{"+7", 5, 0, "7", decimalOK},
		{"0", 1, 0, "0", decimalOK},
		{"-0", 3, 1, "0.0", decimalOK},
		{".25", 3, 2, "0.25", decimalOK},
		{"3.", 3, 2, "3.00", decimalOK},
		{"0001.2300", 3, 2, "1.23", decimalOK},
		{"99999999999999999999999999999999999999", 38, 0, "99999999999999999999999999999999999999", decimalOK},
		{"-99999999999999999999999999999999999999", 38, 0, "-99999999999999999999999999999999999999", decimalOK},
		{"-9999999999999999999.9999999999999999999", 38, 19, "-9999999999999999999.9999999999999999999", decimalOK},
		{"0.00000000000000000000000000000000000001", 38, 38, "0.00000000000000000000000000000000000001", decimalOK},
		{"12345678901234567890", 38, 18, "12345678901234567890.000000000000000000", decimalOK},
		{"1.234", 10, 2, "", decimalRounding},
		{"100", 4, 2, "", decimalOverflow},
		{"100000000000000000000000000000000000000", 38, 0, "", decimalOverflow},
		{"1", 2, 2, "", decimalOverflow},
		{"", 4, 2, "", decimalSyntax},
		{"-", 4, 2, "", decimalSyntax},
		{".", 4, 2, "", decimalSyntax},
		{"1e5", 10, 0, "", decimalSyntax},
		{" 1", 10, 0, "", decimalSyntax},
		{"1,5", 10, 1, "", decimalSyntax},
		{"--1", 10, 0, "", decimalSyntax},
		{"NaN", 10, 0, "", decimalSyntax},
		{"1.2.3", 10, 2, "", decimalSyntax},
		{"١٢", 10, 0, "", decimalSyntax},
	}
	for _, tt := range tests {
		n, problem := parseDecimal(tt.in, tt.p, tt.s)
		if problem != tt.wantProblm {
			t.Errorf("parseDecimal(%q, %d, %d) problem = %d; want %d", tt.in, tt.p, tt.s, problem, tt.wantProblm)
			continue
		}
		if problem != decimalOK {
			continue
		}
		if got := string(appendDecimal(nil, n, tt.s)); got != tt.want {
			t.Errorf("parseDecimal(%q, %d, %d) = %s; want %s", tt.in, tt.p, tt.s, got, tt.want)
		}
		if got, want := string(appendDecimal(nil, n, tt.s)), n.ToString(int32(tt.s)); got != want {
			t.Errorf("appendDecimal(%q) = %s; ToString = %s", tt.in, got, want)
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

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"1.5", "-0.00", "+.1", "99999", "1e3", ""} {
		f.Add(s, 10, 2)
	}
	f.Fuzz(func(t *testing.T, s string, p, sc int) {
		if p < 1 || p > 38 || sc < 0 || sc > p {
			return
		}
		n, problem := parseDecimal(s, p, sc)
		if problem != decimalOK {
			return
		}
		if !n.FitsInPrecision(int32(p)) {
			t.Fatalf("parseDecimal(%q, %d, %d) = %v does not fit", s, p, sc, n)
		}
		text := string(appendDecimal(nil, n, sc))
		back, problem := parseDecimal(text, p, sc)
		if problem != decimalOK || back != n {
			t.Fatalf("round trip of %q via %q failed", s, text)
		}
		// The value equals the input read as a rational.
		want, ok := new(big.Rat).SetString(strings.TrimPrefix(s, "+"))
		got, _ := new(big.Rat).SetString(text)
		if ok && want.Cmp(got) != 0 {
			t.Fatalf("parseDecimal(%q) = %s", s, text)
		}
	})
}
