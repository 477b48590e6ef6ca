package soak

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/reminder"
)

// What the checker reads of digests: the mirror's members (the rows sealed
// under a digest's key) against the digest messages the sinks took, each
// listing the reminders it carries (an email's references, a webhook
// body's data.reminders).

// Rules of digests, by name.
const (
	// RuleDigestOnce is no violation: a digest member went out once,
	// inside its digest's message.
	RuleDigestOnce      = "a digest member sent or delivered: received once, inside its digest's message"
	RuleDigestListing   = "a digest's message does not list each member sealed under its key exactly once, as the mirror holds it"
	RuleDigestStranger  = "a digest's message lists a reminder the mirror did not seal under its key"
	RuleDigestWithdrawn = "a member cancelled before its digest was sealed is in the digest's message"
	RuleDigestMessageID = "a digest's members are recorded sent under more than one provider message id"
	RuleDigestNoNotice  = "a member cancelled once its digest was sealed is in the received digest, and its cancellation notice was not"
)

// digestIndex is the digest messages the sinks took, read against the
// mirror.
type digestIndex struct {
	// members are the rows sealed under each digest key.
	members map[string][]Row
	// carried are the digest messages that list each reminder (a
	// message once however often it lists it), by reminder; inKey those
	// under the reminder's own digest key.
	carried map[string][]Receipt
	inKey   map[string]int
	// messages counts the digest messages taken, by channel.
	messages map[string]int
}

// indexDigests reads the digest messages rs against the mirror: a key the
// mirror holds on no row or delivery is unknown; each message must list
// every member sealed under its key once, with its shipment and (a
// webhook's) its own key, and no other reminder, but for one in the
// documented window (an unknown outcome on its trail: a message in flight
// at a kill, resealed after it) or one cancelled before the seal (left
// out: a violation of its own).
func indexDigests(s Snapshot, rs []Receipt, add func(rule, id, format string, args ...any)) digestIndex {
	ix := digestIndex{members: map[string][]Row{}, carried: map[string][]Receipt{}, inKey: map[string]int{}, messages: map[string]int{}}
	byID := map[string]Row{}
	known := map[string]bool{}
	for _, row := range s.Rows {
		byID[row.ID] = row
		if row.DigestKey != "" {
			ix.members[row.DigestKey] = append(ix.members[row.DigestKey], row)
			known[row.DigestKey] = true
		}
	}
	for _, d := range s.Deliveries {
		if d.DigestKey != "" {
			known[d.DigestKey] = true
		}
	}
	for _, r := range rs {
		if !known[r.Key] {
			add(RuleUnknownKey, "", "%s digest %s to %s at %s, listing %d", r.Channel, r.Key, r.To, r.Received.Format(time.RFC3339Nano), len(r.Listed))
			continue
		}
		ix.messages[r.Channel]++
		times := map[string]int{}
		for _, l := range r.Listed {
			times[l.ReminderID]++
		}
		for _, m := range ix.members[r.Key] {
			if times[m.ID] != 1 {
				add(RuleDigestListing, m.ID, "%s digest %s at %s lists it %d time(s), of %d listed", r.Channel, r.Key,
					r.Received.Format(time.RFC3339Nano), times[m.ID], len(r.Listed))
			}
		}
		seen := map[string]bool{}
		for _, l := range r.Listed {
			row, ok := byID[l.ReminderID]
			switch {
			case !ok:
				add(RuleDigestStranger, l.ReminderID, "%s digest %s at %s lists a reminder the mirror does not hold", r.Channel, r.Key,
					r.Received.Format(time.RFC3339Nano))
				continue
			case row.State == reminder.Cancelled:
				add(RuleDigestWithdrawn, row.ID, "%s digest %s at %s lists it; the row is cancelled; trail: %s", r.Channel, r.Key,
					r.Received.Format(time.RFC3339Nano), trail(s.Events[row.ID]))
			case row.DigestKey != r.Key && unconfirmed(s.Events[row.ID], row.DeliveryKey) == 0:
				add(RuleDigestStranger, row.ID, "%s digest %s at %s lists it; its digest key is %q, and no unknown outcome is on its trail",
					r.Channel, r.Key, r.Received.Format(time.RFC3339Nano), row.DigestKey)
			}
			if l.Shipment != row.Shipment || row.Channel != reminder.Channel(r.Channel) || row.Address != r.To {
				add(RuleDigestListing, row.ID, "%s digest %s to %s lists it for shipment %q; the row is %s's, on %s to %s", r.Channel, r.Key, r.To,
					l.Shipment, row.Shipment, row.Channel, row.Address)
			}
			if l.DeliveryKey != "" && l.DeliveryKey != row.DeliveryKey {
				add(RuleOldKey, row.ID, "%s digest %s at %s lists it under key %s; its final key is %s", r.Channel, r.Key,
					r.Received.Format(time.RFC3339Nano), l.DeliveryKey, row.DeliveryKey)
			}
			if !seen[row.ID] {
				seen[row.ID] = true
				ix.carried[row.ID] = append(ix.carried[row.ID], r)
				if row.DigestKey == r.Key {
					ix.inKey[row.ID]++
				}
			}
		}
	}
	return ix
}

// times is how often the reminder row went out, for the rule of one
// delivery: its final key's receipts, and the digest messages that carry
// it under its digest's key, or under another when its trail has an
// unknown outcome (a message in flight at a kill, resealed after it).
func (ix digestIndex) times(row Row, own int, unknowns int) int {
	if unknowns > 0 {
		return own + len(ix.carried[row.ID])
	}
	return own + ix.inKey[row.ID]
}

// checkDigests applies the rules of a whole digest: its members recorded
// sent under one provider message id, and a member cancelled once sealed,
// carried by a message the sink took, told of the cancel.
func checkDigests(s Snapshot, ix digestIndex, notices map[string]bool, add func(rule, id, format string, args ...any)) {
	keys := make([]string, 0, len(ix.members))
	for k := range ix.members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ids := map[string][]string{}
		for _, m := range ix.members[k] {
			if id := s.Deliveries[m.DeliveryKey].ProviderMessageID; id != "" {
				ids[id] = append(ids[id], m.ID)
			}
		}
		if len(ids) > 1 {
			var parts []string
			for id, ms := range ids {
				parts = append(parts, fmt.Sprintf("%s: %s", id, strings.Join(ms, ", ")))
			}
			slices.Sort(parts)
			add(RuleDigestMessageID, "", "digest %s of %d member(s): %s", k, len(ix.members[k]), strings.Join(parts, "; "))
		}
	}
	maybe := map[string]bool{} // reminders whose notice's outcome is unknown
	for _, d := range s.Deliveries {
		if d.Purpose == reminder.PurposeCancellation && d.MaybeSent {
			maybe[d.ReminderID] = true
		}
	}
	for _, row := range s.Rows {
		if len(ix.carried[row.ID]) == 0 || row.State == reminder.Cancelled || !cancelledAfterSend(s.Events[row.ID]) {
			continue
		}
		if !notices[row.ID] && !maybe[row.ID] {
			add(RuleDigestNoNotice, row.ID, "the row is %s; digest %s carried it at %s; trail: %s", row.State, ix.carried[row.ID][0].Key,
				receivedAt(ix.carried[row.ID]), trail(s.Events[row.ID]))
		}
	}
}

// cancelledAfterSend reports whether the trail records a cancel that met
// the reminder sent: compensated with a notice.
func cancelledAfterSend(events []Event) bool {
	for _, e := range events {
		if e.Type == "cancelled_late" || e.Type == "cancelled" && e.Detail["after"] == "sent" {
			return true
		}
	}
	return false
}

// DigestTally is a run's digest figures: the reminders that asked for a
// digest, those sealed into one and the digests they made, those that
// went out alone (no other member met them), and the digest messages the
// sinks took, by channel.
type DigestTally struct {
	Asked    int            `json:"asked"`
	Members  int            `json:"sealed_members"`
	Digests  int            `json:"digests"`
	Alone    int            `json:"went_alone"`
	Messages map[string]int `json:"messages_by_channel"`
}

// tallyDigests counts a run's digests.
func tallyDigests(s Snapshot, ix digestIndex) DigestTally {
	t := DigestTally{Digests: len(ix.members), Messages: ix.messages}
	for _, row := range s.Rows {
		switch {
		case row.DigestKey != "":
			t.Members++
			t.Asked++
		case row.Digest > 0:
			t.Asked++
			if row.State.Handed() {
				t.Alone++
			}
		}
	}
	return t
}
