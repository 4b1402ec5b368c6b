package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/objstore"
)

// A Walk fetches the first pages of the directories ahead of it, several at once, and still gives
// every object in lexical key order, never lists a directory descend refused, and sends no listing
// more than a sequential walk would. A walk that fn stops leaves nothing running (goleak).
func TestWalkListsDirectoriesAhead(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket(t, "lake")
	var want []string
	put := func(key string) {
		srv.Put(t, "lake", key, []byte("x"))
		if !strings.Contains(key, "/_") {
			want = append(want, "s3://lake/"+key)
		}
	}
	for d := range 40 {
		put(fmt.Sprintf("t/day=%02d/part-0.csv", d))
		if d%10 == 0 {
			put(fmt.Sprintf("t/day=%02d/hour=01/part-1.csv", d)) // a level deeper
			put(fmt.Sprintf("t/day=%02d/hour=02/part-2.csv", d))
		}
	}
	put("t/_hidden/part-9.csv")
	put("t/top.csv")
	slices.Sort(want)
	watch := srv.Watch(t, 5*time.Millisecond)
	st := objstore.New()
	defer st.Close()
	ctx := context.Background()
	descend := func(dir string) bool {
		return !strings.HasPrefix(dir[strings.LastIndex(strings.TrimSuffix(dir, "/"), "/")+1:], "_")
	}

	var got []string
	if err := st.Walk(ctx, mustParse(t, "s3://lake/t/"), descend, func(o objstore.Object) error {
		got = append(got, o.URL())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %d objects:\n%s\nwant %d in lexical order:\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	prefixes := watch.ListPrefixes()
	for _, p := range prefixes {
		if strings.Contains(p, "_hidden") {
			t.Errorf("listed %q, which descend refused", p)
		}
	}
	if dirs := 1 + 40 + 4*2; len(prefixes) != dirs {
		t.Errorf("%d listings; want %d, one per directory walked", len(prefixes), dirs)
	}
	if lists, _ := watch.MaxConcurrent(); lists < 2 || lists > 17 {
		t.Errorf("at most %d listings in flight at once; want several (2 to 17: the walk's own and up to 16 ahead)", lists)
	}
	if reqs, _ := st.Stats(); reqs != int64(len(prefixes)) {
		t.Errorf("the store counted %d requests; the endpoint saw %d listings", reqs, len(prefixes))
	}

	// stopped part way: fn's error comes back as it is, and the listings ahead end with the walk
	stop := errors.New("enough")
	n := 0
	err := st.Walk(ctx, mustParse(t, "s3://lake/t/"), descend, func(objstore.Object) error {
		if n++; n == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 5 {
		t.Errorf("walk stopped by fn: %v after %d objects; want fn's error after 5", err, n)
	}
}
