// Package arrowcheck checks decoded Arrow arrays from untrusted bytes (an IPC file, a frame off the
// wire) before anything reads their values: the verdict of arrow's array.ValidateFull, with string
// values checked as UTF-8 in one pass over their bytes rather than one value at a time.
package arrowcheck
