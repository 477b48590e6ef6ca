package main

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// migrate runs as the owner (SHIPNOTIFY_MIGRATE_DATABASE_URL) while
// DATABASE_URL is the runtime role's, which could not create the tables;
// the runtime role then runs the product on them.
func TestMigrateRunsAsTheOwner(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	runtimeURL := testenv.RuntimeRole(t, db)
	ctx := context.Background()
	// A fresh, empty schema in the same database, owned by the test's owner.
	schema := db.Schema + "_m"
	_, err := db.Pool.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.Pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	at := func(raw string) string {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	c := cmdline{env: map[string]string{
		"DATABASE_URL":          at(runtimeURL),
		"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys,
	}}

	code, _, _ := c.run(t, "", "migrate")
	require.NotEqual(t, 0, code, "the runtime role cannot migrate")

	c.env["SHIPNOTIFY_MIGRATE_DATABASE_URL"] = at(db.URL)
	code, out, errOut := c.run(t, "", "migrate")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "schema is up to date\n", out)

	pool, err := pgxpool.New(ctx, at(runtimeURL))
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'U', 'k', 's', 't')`)
	require.NoError(t, err, "the runtime role works on the owner's tables")
}
