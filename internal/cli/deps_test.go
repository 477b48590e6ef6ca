package cli_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// Issue 35: the mirror's times come back in UTC whatever the host's zone
// (pgx's default is time.Local), so every JSON output (list --json, show
// --json, the API) states them with Z as export and the trail do.
func TestTheMirrorReadsTimesInUTC(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	env := map[string]string{"DATABASE_URL": db.URL, "TEMPORAL_CONFIG_FILE": "/nonexistent"}
	d, err := cli.NewDeps(cli.Env{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
	require.NoError(t, err)
	defer d.Close()
	ctx := context.Background()
	store, err := d.Mirror(ctx, 2)
	require.NoError(t, err)
	var at time.Time
	var ats []time.Time
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT now(), ARRAY[now()]`).Scan(&at, &ats))
	require.Same(t, time.UTC, at.Location())
	require.Len(t, ats, 1)
	require.Same(t, time.UTC, ats[0].Location())
}
