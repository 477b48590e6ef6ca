package api

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

// Issue 35: a 422 with two problems says "1 more problem", not "problems".
func TestA422CountsTheOtherProblemsInWords(t *testing.T) {
	t.Parallel()
	errs := reminder.FieldErrors{{Field: "kind", Problem: "is unknown"}, {Field: "subscribers[0].email", Problem: "is not an address"}}
	p, ok := invalidUpdate(errs)
	require.True(t, ok)
	require.Contains(t, p.Detail, "(and 1 more problem: errors lists them all)")
	p, ok = invalidUpdate(append(errs, &reminder.FieldError{Field: "subscribers[1].url", Problem: "is not https"}))
	require.True(t, ok)
	require.Contains(t, p.Detail, "(and 2 more problems: errors lists them all)")
}
