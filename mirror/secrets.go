package mirror

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Sealer encrypts the secrets the mirror keeps at rest (webhook signing
// secrets), bound to the reminder that holds each; *codec.Codec is one, with
// the payload keys and their rotation.
type Sealer interface {
	SealSecret(secret, owner string) (string, error)
	OpenSecret(stored, owner string) (string, error)
	// ResealNeeded reports whether a stored secret is in the clear or
	// sealed with a key other than the sealing one.
	ResealNeeded(stored string) bool
}

// SealSecretsWith makes the store seal webhook secrets as it writes them
// and open them as it reads them. Without a sealer (payload encryption
// turned off, in development) they are stored in the clear.
func (s *Store) SealSecretsWith(sealer Sealer) *Store {
	s.sealer = sealer
	return s
}

func (s *Store) sealSecret(secret, reminderID string) (string, error) {
	if s.sealer == nil || secret == "" {
		return secret, nil
	}
	sealed, err := s.sealer.SealSecret(secret, reminderID)
	if err != nil {
		return "", fmt.Errorf("error sealing webhook secret: %w", err)
	}
	return sealed, nil
}

func (s *Store) openSecret(stored, reminderID string) (string, error) {
	if s.sealer == nil || stored == "" {
		return stored, nil
	}
	secret, err := s.sealer.OpenSecret(stored, reminderID)
	if err != nil {
		return "", fmt.Errorf("error opening the webhook secret of reminder %s: %w", reminderID, err)
	}
	return secret, nil
}

// ResealSecrets seals again, with the current sealing key, every webhook
// secret stored in the clear or under another key, batch rows at a time, and
// returns how many it changed. After a key rotation it lets the old key be
// dropped; it is idempotent, and a row changed concurrently is left for the
// next run.
func (s *Store) ResealSecrets(ctx context.Context, batch int) (int, error) {
	if s.sealer == nil {
		return 0, fmt.Errorf("error resealing secrets: no payload keys configured")
	}
	total, after := 0, ""
	for {
		rows, _ := s.pool.Query(ctx, `
SELECT id, webhook_secret FROM reminders
 WHERE webhook_secret IS NOT NULL AND id > $1
 ORDER BY id LIMIT $2`, after, batch)
		type stored struct{ id, secret string }
		page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stored, error) {
			var r stored
			return r, row.Scan(&r.id, &r.secret)
		})
		if err != nil {
			return total, fmt.Errorf("error reading webhook secrets: %w", err)
		}
		for _, r := range page {
			if !s.sealer.ResealNeeded(r.secret) {
				continue
			}
			plain, err := s.openSecret(r.secret, r.id)
			if err != nil {
				return total, err
			}
			sealed, err := s.sealSecret(plain, r.id)
			if err != nil {
				return total, err
			}
			tag, err := s.pool.Exec(ctx, `UPDATE reminders SET webhook_secret = $3 WHERE id = $1 AND webhook_secret = $2`,
				r.id, r.secret, sealed)
			if err != nil {
				return total, fmt.Errorf("error resealing webhook secret: %w", err)
			}
			total += int(tag.RowsAffected())
		}
		if len(page) < batch {
			return total, nil
		}
		after = page[len(page)-1].id
	}
}
