package tableschema_test

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/loaderproject/loader/tableschema"
)

func TestParseDecimal(t *testing.T) {
	loose := tableschema.DecimalLoose
	tests := []struct {
		in     string
		p, s   int
		syntax tableschema.DecimalSyntax
		want   string // canonical text at scale s, when err is nil
		err    error
	}{
		{in: "19.99", p: 10, s: 2, want: "19.99"},
		{in: "-0.5", p: 10, s: 2, want: "-0.50"},
		{in: "+7", p: 5, s: 0, want: "7"},
		{in: "0", p: 1, s: 0, want: "0"},
		{in: "-0", p: 3, s: 1, want: "0.0"},
		{in: "-0.00", p: 5, s: 2, want: "0.00"},
		{in: ".25", p: 3, s: 2, want: "0.25"},
		{in: ".5", p: 1, s: 1, want: "0.5"},
		{in: "3.", p: 3, s: 2, want: "3.00"},
		{in: "5.", p: 1, s: 0, want: "5"},
		{in: "0001.2300", p: 3, s: 2, want: "1.23"},
		{in: "000123.4500", p: 5, s: 2, want: "123.45"},
		{in: "100", p: 3, s: 0, want: "100"},
		{in: "0.00120", p: 5, s: 5, want: "0.00120"},
		{in: "99999999999999999999999999999999999999", p: 38, s: 0, want: "99999999999999999999999999999999999999"},
		{in: "-99999999999999999999999999999999999999", p: 38, s: 0, want: "-99999999999999999999999999999999999999"},
		{in: "-9999999999999999999.9999999999999999999", p: 38, s: 19, want: "-9999999999999999999.9999999999999999999"},
		{in: "0.00000000000000000000000000000000000001", p: 38, s: 38, want: "0.00000000000000000000000000000000000001"},
		{in: "12345678901234567890", p: 38, s: 18, want: "12345678901234567890.000000000000000000"},
		{in: "1.234", p: 10, s: 2, err: tableschema.ErrDecimalRounding},
		{in: "1.234", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalRounding},
		{in: "100", p: 4, s: 2, err: tableschema.ErrDecimalOverflow},
		{in: "1234", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalOverflow},
		{in: "100000000000000000000000000000000000000", p: 38, s: 0, err: tableschema.ErrDecimalOverflow},
		{in: "1", p: 2, s: 2, err: tableschema.ErrDecimalOverflow},
		{in: "", p: 4, s: 2, err: tableschema.ErrDecimalSyntax},
		{in: "-", p: 4, s: 2, err: tableschema.ErrDecimalSyntax},
		{in: ".", p: 4, s: 2, err: tableschema.ErrDecimalSyntax},
		{in: "1e5", p: 10, s: 0, err: tableschema.ErrDecimalSyntax},
		{in: " 1", p: 10, s: 0, err: tableschema.ErrDecimalSyntax},
		{in: "1,5", p: 10, s: 1, err: tableschema.ErrDecimalSyntax},
		{in: "--1", p: 10, s: 0, err: tableschema.ErrDecimalSyntax},
		{in: "NaN", p: 10, s: 0, err: tableschema.ErrDecimalSyntax},
		{in: "1.2.3", p: 10, s: 2, err: tableschema.ErrDecimalSyntax},
		{in: "١٢", p: 10, s: 0, err: tableschema.ErrDecimalSyntax},
		// the loose syntax: spaces, tabs and exponents
		{in: " \t1.5\t ", p: 5, s: 2, syntax: loose, want: "1.50"},
		{in: "1.25E+1", p: 4, s: 2, syntax: loose, want: "12.50"},
		{in: "125e-2", p: 3, s: 2, syntax: loose, want: "1.25"},
		{in: "100e-2", p: 3, s: 2, syntax: loose, want: "1.00"},
		{in: "0.0012e3", p: 3, s: 2, syntax: loose, want: "1.20"},
		{in: "12e2", p: 6, s: 0, syntax: loose, want: "1200"},
		{in: "-.5e1", p: 2, s: 0, syntax: loose, want: "-5"},
		{in: "0e99999999999", p: 3, s: 2, syntax: loose, want: "0.00"},
		{in: "1e99999999999", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalOverflow},
		{in: "1e-99999999999", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalRounding},
		{in: "", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "  ", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "abc", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "1.2.3", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "1e", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "1e+", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "1e5x", p: 9, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "e5", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "NaN", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "--1", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
		{in: "1 2", p: 5, s: 2, syntax: loose, err: tableschema.ErrDecimalSyntax},
	}
	for _, tt := range tests {
		n, err := tableschema.ParseDecimal(tt.in, tt.p, tt.s, tt.syntax)
		text, terr := tableschema.AppendDecimal([]byte("x"), tt.in, tt.p, tt.s, tt.syntax)
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("ParseDecimal(%q, %d, %d, %d) error = %v; want %v", tt.in, tt.p, tt.s, tt.syntax, err, tt.err)
			continue
		}
		if !errors.Is(terr, tt.err) || (tt.err == nil) != (terr == nil) {
			t.Errorf("AppendDecimal(%q, %d, %d, %d) error = %v; want %v", tt.in, tt.p, tt.s, tt.syntax, terr, tt.err)
			continue
		}
		if err != nil {
			var de *tableschema.DecimalError
			if !errors.As(err, &de) || de.Precision != tt.p || de.Scale != tt.s {
				t.Errorf("ParseDecimal(%q, %d, %d) error = %#v; want a *DecimalError for DECIMAL(%d,%d)", tt.in, tt.p, tt.s, err, tt.p, tt.s)
			}
			if v := strings.TrimSpace(tt.in); v != "" && strings.Contains(err.Error(), v) {
				t.Errorf("ParseDecimal(%q) error %q quotes the value", tt.in, err)
			}
			if string(text) != "x" {
				t.Errorf("AppendDecimal(%q, %d, %d) = %q on failure; want dst unchanged", tt.in, tt.p, tt.s, text)
			}
			continue
		}
		if got := string(text); got != "x"+tt.want {
			t.Errorf("AppendDecimal(x, %q, %d, %d) = %s; want x%s", tt.in, tt.p, tt.s, got, tt.want)
		}
		if got := n.ToString(int32(tt.s)); got != tt.want {
			t.Errorf("ParseDecimal(%q, %d, %d) = %s; want %s", tt.in, tt.p, tt.s, got, tt.want)
		}
	}
}

// TestDecimalErrorText: the reasons read as the loader's messages have always read, and name the type.
func TestDecimalErrorText(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"x", "not a decimal number"},
		{"1.234", "more than 2 fractional digits for DECIMAL(5,2) (values are not rounded)"},
		{"1234", "too many integer digits for DECIMAL(5,2), which holds 3"},
	} {
		_, err := tableschema.ParseDecimal(tt.in, 5, 2, tableschema.DecimalLoose)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseDecimal(%q, 5, 2) error = %v; want %s", tt.in, err, tt.want)
		}
	}
}

func TestParseDecimalAllocations(t *testing.T) {
	var dst []byte
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = tableschema.AppendDecimal(dst[:0], " -1234567890123456789.012345678e2 ", 38, 10, tableschema.DecimalLoose); err != nil {
			t.Fatal(err)
		}
		if _, err := tableschema.ParseDecimal("-12345678901234567890123456.789", 38, 10, tableschema.DecimalPlain); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendDecimal and ParseDecimal allocate %v times; want 0", allocs)
	}
}

// FuzzParseDecimal: ParseDecimal and AppendDecimal accept the same texts; an accepted one fits its
// type, is rendered as decimal128 renders the parsed value, reads back to the same value in the
// plain syntax, and equals the input read as a rational number.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"1.5", "-0.00", "+.1", "99999", "1e3", "", " 12.5E-1 ", "0.0012e3", "100e-2"} {
		f.Add(s, 10, 2, uint8(0))
		f.Add(s, 10, 2, uint8(1))
	}
	f.Add("99999999999999999999999999999999999999", 38, 0, uint8(0))
	f.Fuzz(func(t *testing.T, s string, p, sc int, syntax uint8) {
		if p < 1 || p > tableschema.MaxDecimalPrecision || sc < 0 || sc > p {
			return
		}
		syn := tableschema.DecimalSyntax(syntax % 2)
		n, err := tableschema.ParseDecimal(s, p, sc, syn)
		b, terr := tableschema.AppendDecimal(nil, s, p, sc, syn)
		if (err == nil) != (terr == nil) {
			t.Fatalf("ParseDecimal(%q) error %v but AppendDecimal error %v", s, err, terr)
		}
		if err != nil {
			var de *tableschema.DecimalError
			if !errors.As(err, &de) {
				t.Fatalf("ParseDecimal(%q) error %v is not a *DecimalError", s, err)
			}
			return
		}
		if !n.FitsInPrecision(int32(p)) {
			t.Fatalf("ParseDecimal(%q, %d, %d) = %v does not fit", s, p, sc, n)
		}
		text := string(b)
		if want := n.ToString(int32(sc)); text != want {
			t.Fatalf("AppendDecimal(%q, %d, %d) = %s; ParseDecimal's value renders %s", s, p, sc, text, want)
		}
		back, err := tableschema.ParseDecimal(text, p, sc, tableschema.DecimalPlain)
		if err != nil || back != n {
			t.Fatalf("round trip of %q via %q failed: %v", s, text, err)
		}
		want, ok := new(big.Rat).SetString(strings.TrimPrefix(strings.Trim(s, " \t"), "+"))
		got, _ := new(big.Rat).SetString(text)
		if ok && want.Cmp(got) != 0 {
			t.Fatalf("ParseDecimal(%q) = %s", s, text)
		}
		if !ok && syn == tableschema.DecimalPlain { // (big.Rat refuses exponents beyond an int)
			t.Fatalf("ParseDecimal accepted %q, which is not a number", s)
		}
	})
}

// IsCanonicalDecimal is true exactly when AppendDecimal gives the text back unchanged: checked on
// every text of up to 6 characters over an alphabet of the characters that matter, for types
// with and without a fraction or an integer part.
func TestIsCanonicalDecimal(t *testing.T) {
	alphabet := []byte("-+.0159e ")
	types := [][2]int{{1, 0}, {2, 0}, {3, 1}, {4, 2}, {2, 2}, {1, 1}, {6, 3}, {38, 0}}
	var text []byte
	checked, canonical := 0, 0
	var walk func()
	walk = func() {
		s := string(text)
		for _, ty := range types {
			want := false
			if out, err := tableschema.AppendDecimal(nil, s, ty[0], ty[1], tableschema.DecimalPlain); err == nil {
				want = string(out) == s
			}
			got := tableschema.IsCanonicalDecimal(s, ty[0], ty[1])
			if got != want {
				t.Fatalf("IsCanonicalDecimal(%q, %d, %d) = %v; AppendDecimal gives it back: %v", s, ty[0], ty[1], got, want)
			}
			if got {
				canonical++
				if out, err := tableschema.AppendDecimal(nil, s, ty[0], ty[1], tableschema.DecimalLoose); err != nil || string(out) != s {
					t.Fatalf("canonical %q for DECIMAL(%d,%d): the loose syntax gives %q, %v", s, ty[0], ty[1], out, err)
				}
			}
			checked++
		}
		if len(text) == 6 {
			return
		}
		for _, c := range alphabet {
			text = append(text, c)
			walk()
			text = text[:len(text)-1]
		}
	}
	walk()
	if canonical < 1000 {
		t.Fatalf("only %d of %d texts were canonical: the alphabet misses the cases that matter", canonical, checked)
	}
	for _, c := range []struct {
		s          string
		prec, scal int
		want       bool
	}{
		{"123456789012.34", 14, 2, true}, {"-0.01", 12, 2, true}, {"-0.00", 12, 2, false}, {"0.00", 12, 2, true},
		{"1234567890123.45", 14, 2, false}, {"12.3", 12, 2, false}, {"12", 12, 0, true}, {"012.30", 12, 2, false},
	} {
		if got := tableschema.IsCanonicalDecimal(c.s, c.prec, c.scal); got != c.want {
			t.Errorf("IsCanonicalDecimal(%q, %d, %d) = %v; want %v", c.s, c.prec, c.scal, got, c.want)
		}
	}
}
