package starter

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
)

// Only the server's InvalidArgument naming one of our attributes is the
// "run setup" error; the same words in another error, or another
// attribute, are not.
func TestOnlyTheServersNoMappingRefusalIsTheSetupError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		attr string
	}{
		{serviceerror.NewInvalidArgument("Namespace default has no mapping defined for search attribute DueAt"), "DueAt"},
		{fmt.Errorf("error starting: %w", serviceerror.NewInvalidArgument("Namespace x has no mapping defined for search attribute ShipmentId")), "ShipmentId"},
		{serviceerror.NewInvalidArgument("search attribute ReminderState is not defined"), "ReminderState"},
		{serviceerror.NewInvalidArgument("invalid query: invalid expression: column name 'UpdateId' is not a valid search attribute"), "UpdateId"},
		{serviceerror.NewInvalidArgument("Namespace default has no mapping defined for search attribute CustomerTier"), ""},
		{serviceerror.NewInvalidArgument("number of search attributes 5 exceeds limit 4"), ""},
		{serviceerror.NewUnavailable("Namespace default has no mapping defined for search attribute DueAt"), ""},
		{errors.New("Namespace default has no mapping defined for search attribute DueAt"), ""},
	} {
		attr, ok := unknownAttribute(tc.err)
		require.Equal(t, tc.attr, attr, tc.err.Error())
		require.Equal(t, tc.attr != "", ok, tc.err.Error())
	}
}
