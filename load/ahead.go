package load

import (
	"context"
	"sync"

	"github.com/loaderproject/loader/readers"
)

// openedFile is a file discovery found, opened ahead of its turn when it is in object storage.
type openedFile struct {
	f    readers.File
	done chan struct{} // closed once src and err are set; nil when the file is opened in its turn
	src  readers.Source
	err  error
}

// source returns the file's source: the one opened ahead, or the file opened now.
func (o *openedFile) source(ctx context.Context, p *pipeline) (readers.Source, error) {
	if o.done == nil {
		return p.open(ctx, o.f)
	}
	<-o.done // the opening's context is the load's: it ends when ctx does
	return o.src, o.err
}

// discard closes a file opened ahead and never scheduled.
func (o *openedFile) discard() {
	if o.done == nil {
		return
	}
	<-o.done
	if o.src != nil {
		_ = o.src.Close()
	}
}

// filesAhead hands over the files discovery finds, in order, the ones in object storage opened
// up to openAhead ahead of their turn: opening one costs a round trip or two (its footer, its first
// rows), and a load of many small objects would otherwise wait for them one at a time (2,000 small
// CSV objects behind 25 ms of latency took 55 s, whatever --decoders). A local file opens in its
// turn, as it costs no round trip. What is open ahead is a footer or the first block of a file, so
// memory stays small beside the in-flight budget.
type filesAhead struct {
	ch     chan *openedFile
	err    error // discovery's, set before ch is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// openAhead starts handing over the files next gives (ok false: no more, err: discovery failed),
// opened by p; stop ends it. next is called from one goroutine.
func (p *pipeline) openAhead(ctx context.Context, next func(context.Context) (f readers.File, ok bool, err error)) *filesAhead {
	actx, cancel := context.WithCancel(ctx)
	a := &filesAhead{ch: make(chan *openedFile, openAhead-1), cancel: cancel}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(a.ch)
		for {
			f, ok, err := next(actx)
			if !ok {
				a.err = err
				return
			}
			o := &openedFile{f: f}
			if f.Store != nil {
				o.done = make(chan struct{})
				a.wg.Add(1)
				go func() {
					defer a.wg.Done()
					defer close(o.done)
					o.src, o.err = p.open(actx, f)
				}()
			}
			select {
			case a.ch <- o: // waits while openAhead files are open and not yet taken
			case <-actx.Done():
				o.discard()
				return
			}
		}
	}()
	return a
}

// next returns the next file, nil when discovery has ended (its error then) or ctx has.
func (a *filesAhead) next(ctx context.Context) (*openedFile, error) {
	select {
	case o, ok := <-a.ch:
		if !ok {
			return nil, a.err
		}
		return o, nil
	case <-ctx.Done():
		return nil, nil
	}
}

// stop ends the opening ahead and closes the files opened and not taken.
func (a *filesAhead) stop() {
	a.once.Do(func() {
		a.cancel()
		for o := range a.ch {
			o.discard()
		}
		a.wg.Wait()
	})
}

// eachOpened calls use with each of files in order, opened as a load opens them (objects ahead):
// its source, which use closes, or the error opening it. It stops early only when ctx ends.
func (p *pipeline) eachOpened(ctx context.Context, files []readers.File, use func(readers.File, readers.Source, error)) {
	i := 0
	a := p.openAhead(ctx, func(context.Context) (readers.File, bool, error) {
		if i == len(files) {
			return readers.File{}, false, nil
		}
		i++
		return files[i-1], true, nil
	})
	defer a.stop()
	for {
		o, _ := a.next(ctx)
		if o == nil {
			return
		}
		src, err := o.source(ctx, p)
		use(o.f, src, err)
	}
}
