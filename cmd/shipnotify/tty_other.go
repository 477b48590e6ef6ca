//go:build !linux

package main

import "os"

// isTerminal reports whether f is a character device: a terminal, or
// rarely /dev/null, where a note on stderr is harmless.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
