package mirror

import (
	"context"
	"fmt"
	"time"
)

// The approval console's sessions (migration 00018): one row a login,
// keyed by the SHA-256 of the random id its cookie carries. A session
// whose row is gone is over, on every serve that shares the mirror.

// CreateConsoleSession records a login's session for approver until
// expires, and deletes the sessions expired at now: logins keep the table
// to the live sessions, with no prune run.
func (s *Store) CreateConsoleSession(ctx context.Context, idHash []byte, approver string, expires, now time.Time) error {
	_, err := s.pool.Exec(ctx, `
WITH expired AS (DELETE FROM console_sessions WHERE expires_at <= $4)
INSERT INTO console_sessions (id_hash, approver, expires_at) VALUES ($1, $2, $3)`, idHash, approver, expires, now)
	if err != nil {
		return fmt.Errorf("error recording a console session: %w", err)
	}
	return nil
}

// ConsoleSessionLive reports whether the session is still recorded, for
// approver.
func (s *Store) ConsoleSessionLive(ctx context.Context, idHash []byte, approver string) (bool, error) {
	var live bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_sessions WHERE id_hash = $1 AND approver = $2)`,
		idHash, approver).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("error reading a console session: %w", err)
	}
	return live, nil
}

// EndConsoleSession deletes the session's row: its cookie, and every copy
// of it, logs no one in any more.
func (s *Store) EndConsoleSession(ctx context.Context, idHash []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE id_hash = $1`, idHash); err != nil {
		return fmt.Errorf("error ending a console session: %w", err)
	}
	return nil
}

// EndApproverSessions deletes every session of approver, on every serve
// that shares the mirror: the console calls it when one of the approver's
// keys is removed, so putting the key back revives none of them. It
// returns how many ended.
func (s *Store) EndApproverSessions(ctx context.Context, approver string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE approver = $1`, approver)
	if err != nil {
		return 0, fmt.Errorf("error ending an approver's console sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}
