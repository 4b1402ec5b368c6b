//go:build unix

package fsutil

import (
	"errors"
	"syscall"
	"testing"
)

// TestRetryEINTR: a flock interrupted by a signal is tried again; "would block" is ErrLocked and
// any other error is returned as it is.
func TestRetryEINTR(t *testing.T) {
	tests := []struct {
		name  string
		errs  []error // what successive flock calls return
		want  error
		calls int
	}{
		{"free", []error{nil}, nil, 1},
		{"interrupted twice", []error{syscall.EINTR, syscall.EINTR, nil}, nil, 3},
		{"interrupted, then held", []error{syscall.EINTR, syscall.EWOULDBLOCK}, ErrLocked, 2},
		{"held", []error{syscall.EWOULDBLOCK}, ErrLocked, 1},
		{"bad descriptor", []error{syscall.EBADF}, syscall.EBADF, 1},
	}
	for _, tt := range tests {
		calls := 0
		err := retryEINTR(func() error {
			err := tt.errs[calls]
			calls++
			return err
		})
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) || calls != tt.calls {
			t.Errorf("%s: retryEINTR = %v after %d calls; want %v after %d", tt.name, err, calls, tt.want, tt.calls)
		}
	}
}
