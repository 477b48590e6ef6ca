package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/sendwindow"
)

// The send windows file: a tenant's line gives its default window, its
// zone and its holidays (a file beside it, or dates); the default tenant
// is keyed as its id, "". A bad line stops the process at start, naming
// the variable and the line, never a value.
func TestTheSendWindowsFileGivesEachTenantItsDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ics := "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:x1\r\nDTSTAMP:20261201T000000Z\r\n" +
		"DTSTART;VALUE=DATE:20271224\r\nDTEND;VALUE=DATE:20271225\r\nSUMMARY:Heiligabend\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "acme.ics"), []byte(ics), 0o600))
	path := filepath.Join(dir, "windows")
	require.NoError(t, os.WriteFile(path, []byte(
		"# tenant defaults\n"+
			"tenant=acme days=mon-fri hours=08:00-18:00 time_zone=Europe/Berlin holidays=acme.ics\n"+
			"tenant=ops holidays=2027-01-01\n"), 0o600))

	got, err := config.ReadSendWindows(path, "ops", time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Len(t, got, 2)
	acme := got["acme"]
	require.NotNil(t, acme.Window)
	require.Equal(t, sendwindow.Weekdays, acme.Window.Days)
	require.Equal(t, "Europe/Berlin", acme.TimeZone)
	require.Equal(t, []sendwindow.Date{{Year: 2027, Month: time.December, Day: 24}}, acme.Holidays)
	def, ok := got[""]
	require.True(t, ok, "the default tenant, named ops, is keyed as ''")
	require.Nil(t, def.Window)
	require.Equal(t, []sendwindow.Date{{Year: 2027, Month: time.January, Day: 1}}, def.Holidays)

	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte("tenant=acme hours=08:00-31:00 days=mon-fri\n"), 0o600))
	_, err = config.Load(lookup(map[string]string{"TEMPORAL_CONFIG_FILE": "/nonexistent", "SHIPNOTIFY_SEND_WINDOWS_FILE": bad}))
	require.ErrorContains(t, err, "SHIPNOTIFY_SEND_WINDOWS_FILE: line 1")
	require.NotContains(t, err.Error(), "31:00")
}
