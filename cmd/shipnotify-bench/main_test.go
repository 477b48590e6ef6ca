package main

import (
	"context"
	"testing"
	"time"
)

// cmdline runs shipnotify-bench in-process with exactly the given environment.
type cmdline struct {
	env map[string]string
}

func (c cmdline) run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return shipnotifyBench.RunCaptured(ctx, c.env, stdin, args...)
}
