package objstore

import (
	"context"
	"errors"
	"io"
	"sync"

	"gocloud.dev/blob"
)

// listAhead is how many directories' first pages a Walk fetches ahead of where it is, at most, at
// once.
const listAhead = 16

// Walk lists the objects under loc's key prefix, calling fn for each in lexical key order as the
// pages arrive. With a delimiter of "/", each "directory" of a page is offered to descend before
// the page's entries are walked: when descend returns false (a hidden directory), it is not
// listed. The first pages of the next directories are fetched ahead of the walk, up to 16 at once,
// so a prefix of many small directories (Hive partitions) costs a round trip per 16 directories
// rather than per directory; at most 16 pages a directory level wait in memory. fn's error stops
// the walk and is returned as it is.
func (s *Store) Walk(ctx context.Context, loc Location, descend func(dir string) bool, fn func(Object) error) error {
	listed := false
	return s.onBucket(ctx, loc, func(b *blob.Bucket) error {
		if listed {
			return errors.New("the bucket moved region during the listing") // not reached: a bucket moves on its first request
		}
		ctx, cancel := context.WithCancel(ctx)
		l := &lister{s: s, b: b, loc: loc, ctx: ctx, slots: make(chan struct{}, listAhead)}
		defer l.wg.Wait()
		defer cancel()
		return l.walk(loc.Key, nil, descend, func(o Object) error {
			listed = true
			return fn(o)
		})
	})
}

// lister is one Walk: it fetches the first pages of the directories ahead of the walk in the
// background, at most listAhead requests at once.
type lister struct {
	s     *Store
	b     *blob.Bucket
	loc   Location
	ctx   context.Context // ends with the walk; fetches ahead end with it
	slots chan struct{}   // one per fetch ahead in flight
	wg    sync.WaitGroup
}

// pageAhead is a directory's first page, fetched ahead: page, next and err are set when done is
// closed.
type pageAhead struct {
	done chan struct{}
	page []*blob.ListObject
	next []byte
	err  error
}

// list fetches one page of prefix.
func (l *lister) list(ctx context.Context, prefix string, token []byte) (page []*blob.ListObject, next []byte, err error) {
	l.s.requests.Add(1)
	err = l.s.metadata(ctx, l.loc.Scheme, func(ctx context.Context) (err error) {
		page, next, err = l.b.ListPage(ctx, token, l.s.opts.listPage, &blob.ListOptions{Prefix: prefix, Delimiter: "/"})
		return err
	})
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return page, next, err
}

// ahead starts fetching prefix's first page in the background, or returns nil when listAhead
// fetches are in flight already.
func (l *lister) ahead(prefix string) *pageAhead {
	select {
	case l.slots <- struct{}{}:
	default:
		return nil
	}
	p := &pageAhead{done: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		p.page, p.next, p.err = l.list(l.ctx, prefix, blob.FirstPageToken)
		<-l.slots
		close(p.done)
	}()
	return p
}

// walk walks prefix, whose first page first has fetched ahead (nil: none).
func (l *lister) walk(prefix string, first *pageAhead, descend func(string) bool, fn func(Object) error) error {
	token := blob.FirstPageToken
	for {
		if err := l.ctx.Err(); err != nil {
			return err
		}
		var page []*blob.ListObject
		var next []byte
		var err error
		if first != nil {
			select {
			case <-first.done:
			case <-l.ctx.Done():
				return l.ctx.Err()
			}
			page, next, err = first.page, first.next, first.err
			first = nil
		} else {
			page, next, err = l.list(l.ctx, prefix, token)
		}
		if err != nil {
			return l.s.classify(l.ctx, l.b, l.loc.Child(prefix), "list", err)
		}
		// the page's directories to walk, in order, and their first pages fetched ahead
		var dirs []string
		for _, o := range page {
			if o.IsDir && (descend == nil || descend(o.Key)) {
				dirs = append(dirs, o.Key)
			}
		}
		fetched := make([]*pageAhead, len(dirs))
		started, d := 0, 0 // dirs[:started] fetched ahead or walked; dirs[d] is the next to walk
		for _, o := range page {
			if !o.IsDir {
				if err := fn(Object{Loc: l.loc.Child(o.Key), Size: o.Size, ModTime: o.ModTime, ETag: listETag(o)}); err != nil {
					return err
				}
				continue
			}
			if d == len(dirs) || dirs[d] != o.Key {
				continue // not descended into
			}
			// keep up to listAhead of the directories after this one fetching
			for started = max(started, d+1); started < len(dirs) && started <= d+listAhead; started++ {
				if fetched[started] = l.ahead(dirs[started]); fetched[started] == nil {
					break // no slot free: tried again at the next directory
				}
			}
			if err := l.walk(o.Key, fetched[d], descend, fn); err != nil {
				return err
			}
			fetched[d] = nil
			d++
		}
		if len(next) == 0 {
			return nil
		}
		token = next
	}
}
