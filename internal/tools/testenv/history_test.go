package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A recorded history is never rewritten: the first recording stays.
func TestCreateNewNeverOverwrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sent.json")

	created, err := createNew(path, []byte("first"))
	require.NoError(t, err)
	require.True(t, created)
	created, err = createNew(path, []byte("second"))
	require.NoError(t, err)
	require.False(t, created, "an existing history is reported as kept")

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "first", string(b), "the existing history is left as it was")
}
