package load

import (
	"fmt"
	"testing"

	"github.com/loaderproject/loader/manifest"
)

func TestUncovered(t *testing.T) {
	r := func(a, b int64) manifest.Range { return manifest.Range{From: a, To: b} }
	tests := []struct {
		done     []manifest.Range
		from, to int64
		want     []manifest.Range
	}{
		{nil, 0, 10, []manifest.Range{r(0, 10)}},
		{[]manifest.Range{r(0, 10)}, 0, 10, nil},
		{[]manifest.Range{r(0, 4)}, 0, 10, []manifest.Range{r(4, 10)}},
		{[]manifest.Range{r(6, 20)}, 0, 10, []manifest.Range{r(0, 6)}},
		{[]manifest.Range{r(2, 3), r(5, 7)}, 0, 10, []manifest.Range{r(0, 2), r(3, 5), r(7, 10)}},
		{[]manifest.Range{r(0, 3), r(12, 15)}, 10, 20, []manifest.Range{r(10, 12), r(15, 20)}},
		{[]manifest.Range{r(0, 5)}, 10, 20, []manifest.Range{r(10, 20)}},
		{[]manifest.Range{r(25, 30)}, 10, 20, []manifest.Range{r(10, 20)}},
		{[]manifest.Range{r(0, 100)}, 10, 20, nil},
	}
	for _, tt := range tests {
		got := uncovered(tt.done, tt.from, tt.to)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("uncovered(%v, %d, %d) = %v; want %v", tt.done, tt.from, tt.to, got, tt.want)
		}
	}
}

func TestTakeNeverExceedsLimit(t *testing.T) {
	p := &pipeline{}
	p.remaining.Store(10)
	got := []int64{p.take(4), p.take(4), p.take(4), p.take(4)}
	if fmt.Sprint(got) != "[4 4 2 0]" {
		t.Errorf("take(4) x4 with limit 10 = %v; want [4 4 2 0]", got)
	}
}
