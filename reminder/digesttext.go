package reminder

import (
	"fmt"
	"time"
)

// DigestEvery says a digest interval as an update document writes it
// ("30m", "2h", "1h30m"), not as time.Duration does ("30m0s"): people
// read it back against what they wrote; "" for none.
func DigestEvery(every time.Duration) string {
	if every <= 0 {
		return ""
	}
	h, m := every/time.Hour, every%time.Hour/time.Minute
	switch {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// GoingOutInDigest says, for people, how a reminder gathered into a digest
// every every goes out, before the digest is sealed: "goes out with its
// address's other reminders in a digest every 30m". The CLI's show and
// schedule say it in these words.
func GoingOutInDigest(every time.Duration) string {
	return "goes out with its address's other reminders in a digest every " + DigestEvery(every)
}
