package sink

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A held message is in flight under its delivery key until released, then
// accepted; the two sets are read together.
func TestDeliveryKeysMoveFromInFlightToAccepted(t *testing.T) {
	t.Parallel()
	s, err := StartMail("", "SG.k")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	release := s.Hold()
	t.Cleanup(release)

	body := `{"from":{"email":"a@b.example"},"subject":"s","personalizations":[{"to":[{"email":"c@d.example"}]}],` +
		`"content":[{"type":"text/plain","value":"t"}],"custom_args":{"delivery_key":"k1"}}`
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v3/mail/send", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer SG.k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	require.Eventually(t, func() bool { return s.Held() == 1 }, 10*time.Second, 10*time.Millisecond)
	accepted, inFlight := s.DeliveryKeys()
	require.Empty(t, accepted)
	require.Equal(t, map[string]int{"k1": 1}, inFlight)
	require.Equal(t, 1, s.InFlight())

	release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = s.Wait(ctx, func(m []Mail) bool { return len(m) == 1 })
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, <-answered)
	accepted, inFlight = s.DeliveryKeys()
	require.Equal(t, map[string]int{"k1": 1}, accepted)
	require.Empty(t, inFlight)
	require.Zero(t, s.Held())
}
