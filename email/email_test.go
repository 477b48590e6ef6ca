package email_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
)

func TestAnswersAreClassified(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(now.Add(90*time.Second).Unix(), 10)
	for _, tc := range []struct {
		answer     sink.Answer
		permanent  bool
		retryAfter time.Duration
	}{
		{sink.Answer{Status: 400}, true, 0},
		{sink.Answer{Status: 401}, true, 0},
		{sink.Answer{Status: 403}, true, 0},
		{sink.Answer{Status: 413}, true, 0},
		{sink.Answer{Status: 429, Headers: map[string]string{"X-RateLimit-Reset": reset}}, false, 90 * time.Second},
		{sink.Answer{Status: 429, Headers: map[string]string{"Retry-After": "12"}}, false, 12 * time.Second},
		{sink.Answer{Status: 500}, false, 0},
		{sink.Answer{Status: 503, Headers: map[string]string{"Retry-After": "3"}}, false, 3 * time.Second},
	} {
		t.Run(strconv.Itoa(tc.answer.Status), func(t *testing.T) {
			t.Parallel()
			s, err := sink.StartMail("", "SG.key")
			require.NoError(t, err)
			defer s.Close()
			s.Fail(tc.answer)
			sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: s.URL(), FromEmail: "r@shipnotify.example", Now: func() time.Time { return now }})
			_, err = sender.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "s", Text: "t", DeliveryKey: "k"})
			var derr *delivery.Error
			require.True(t, errors.As(err, &derr), "got %v", err)
			require.Equal(t, tc.answer.Status, derr.Status)
			require.Equal(t, tc.permanent, derr.Permanent)
			require.Equal(t, tc.retryAfter, derr.RetryAfter)
		})
	}
}

// 202 is success: the provider's X-Message-Id comes back, the delivery key
// travels in custom_args, and a wrong API key is a permanent failure.
func TestSendThroughTheRealClient(t *testing.T) {
	t.Parallel()
	s, err := sink.StartMail("", "SG.key")
	require.NoError(t, err)
	defer s.Close()
	sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: s.URL(), FromEmail: "r@shipnotify.example", FromName: "shipnotify"})
	id, err := sender.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "Window", Text: "Dock 4", DeliveryKey: "key-1", Args: map[string]string{"reminder_id": "S/U/a"}})
	require.NoError(t, err)
	mails := s.Mails()
	require.Len(t, mails, 1)
	require.Equal(t, mails[0].MessageID, id)
	require.Equal(t, "key-1", mails[0].CustomArgs["delivery_key"])
	require.Equal(t, "S/U/a", mails[0].CustomArgs["reminder_id"])
	require.Equal(t, "r@shipnotify.example", mails[0].From)

	wrongKey := email.NewSender(email.Options{APIKey: "SG.wrong", BaseURL: s.URL(), FromEmail: "r@shipnotify.example"})
	_, err = wrongKey.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "s", Text: "t"})
	var derr *delivery.Error
	require.True(t, errors.As(err, &derr))
	require.Equal(t, 401, derr.Status)
	require.True(t, derr.Permanent)
}
