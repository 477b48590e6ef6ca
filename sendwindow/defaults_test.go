package sendwindow

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testFiles reads files from testdata, and refuses any other path.
func testFiles(path string) ([]byte, error) {
	if !strings.HasPrefix(path, "testdata/") {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return os.ReadFile(path)
}

func TestParseDefaultsReadsAGoodFile(t *testing.T) {
	t.Parallel()
	file := `# Send-window defaults, one tenant a line.

tenant=acme days=mon-fri hours=08:00-18:00 time_zone=Europe/Berlin holidays=testdata/holidays-de-2027.ics
  tenant=globex   policy=previous time_zone=America/New_York digest=30m  # no window: a zone, a policy, a digest
tenant=initech hours=00:00-24:00 days=sat-sun holidays=2027-12-25,2027-01-01,2027-12-25
tenant=default
`
	got, err := ParseDefaults(strings.NewReader(file), testFiles, Date{2027, 1, 1})
	require.NoError(t, err)
	require.Len(t, got, 4)

	acme := got["acme"]
	require.Equal(t, &Window{Days: Weekdays, From: 8 * 60, To: 18 * 60}, acme.Window)
	require.Equal(t, "Europe/Berlin", acme.TimeZone)
	require.Equal(t, Next, acme.Policy)
	// The file's holidays from today on, the yearly ones for years.
	require.Equal(t, Date{2027, 1, 1}, acme.Holidays[0])
	require.Contains(t, acme.Holidays, Date{2027, 5, 7})
	require.NotContains(t, acme.Holidays, Date{2027, 12, 24})
	require.Contains(t, acme.Holidays, Date{2028, 12, 24})
	require.Contains(t, acme.Holidays, Date{2029, 12, 26})
	require.Equal(t, Date{2030, 1, 1}, acme.Holidays[len(acme.Holidays)-1], "Horizon and two years from 2027-01-01 ends in early 2030")

	require.Equal(t, Default{TimeZone: "America/New_York", Policy: Previous, Digest: 30 * time.Minute}, got["globex"])
	require.Equal(t, Default{Window: &Window{Days: 1<<time.Saturday | 1<<time.Sunday, From: 0, To: EndOfDay}, Policy: Next,
		Holidays: []Date{{2027, 1, 1}, {2027, 12, 25}}}, got["initech"])
	require.Equal(t, Default{Policy: Next}, got["default"])

	// The holidays do what they are for: Christmas Monday 2028 is
	// skipped in acme's window.
	loc := mustLoad(t, "Europe/Berlin")
	w := *acme.Window
	w.Skip = acme.Holidays
	out, ok := w.GoesOut(at(t, "2028-12-22T19:00:00+01:00"), loc, Next) // a Friday evening
	require.True(t, ok)
	require.Equal(t, "2028-12-27T08:00:00+01:00", out.Format(time.RFC3339))

	empty, err := ParseDefaults(strings.NewReader("# nothing yet\n\n"), nil, Date{2027, 1, 1})
	require.NoError(t, err)
	require.Empty(t, empty)
}

// TestParseDefaultsErrorsNameLineAndField gives a bad line for each
// check; every bad value holds "s3cret", which the error must not repeat.
func TestParseDefaultsErrorsNameLineAndField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, line, want string
	}{
		{"a bare word", "tenant=acme s3cret", "setting 2: want one of tenant, days, hours, time_zone, policy, holidays, digest as key=value"},
		{"an unknown key", "tenant=acme s3cret=x", "setting 2: want one of"},
		{"a secret with base64 padding", "tenant=acme c3MzY3JldA==", "setting 2: want one of"},
		{"a key twice", "tenant=acme days=mon days=s3cret", "days: is given twice"},
		{"an empty value", "tenant=acme time_zone=", "time_zone: is empty"},
		{"no tenant", "days=mon-fri hours=08:00-18:00", "tenant: is required"},
		{"a tenant that is not an id", "tenant=s3cret/x", "tenant: want letters, digits"},
		{"days without hours", "tenant=acme days=mon-fri", "hours: is required with days"},
		{"hours without days", "tenant=acme hours=08:00-18:00", "days: is required with hours"},
		{"bad days", "tenant=acme days=s3cret hours=08:00-18:00", "days: is not a day"},
		{"no day", "tenant=acme days=mon-s3cret hours=08:00-18:00", "days: is not a day"},
		{"hours not a range", "tenant=acme days=mon hours=s3cret", "hours: must be two times of day"},
		{"hours out of range", "tenant=acme days=mon hours=08:00-24:30", "hours: closing is not a time of day"},
		{"an opening out of range", "tenant=acme days=mon hours=25:00-26:00", "hours: opening is not a time of day"},
		{"an empty window", "tenant=acme days=mon hours=18:00-08:00", "hours: from must be before to"},
		{"a zone of the wrong shape", "tenant=acme time_zone=../s3cret", "time_zone: is not an IANA time zone name"},
		{"the machine's zone", "tenant=acme time_zone=Local", "time_zone: is not an IANA time zone name"},
		{"an unknown zone", "tenant=acme time_zone=Europe/S3cret", "time_zone: is not a time zone the IANA database knows"},
		{"a bad policy", "tenant=acme policy=s3cret", "policy: is not a window policy"},
		{"a digest that is no interval", "tenant=acme digest=s3cret", "digest: want whole minutes from 1m to 24h"},
		{"a digest under a minute", "tenant=acme digest=30s", "digest: want whole minutes from 1m to 24h"},
		{"a digest of part of a minute", "tenant=acme digest=90s", "digest: want whole minutes from 1m to 24h"},
		{"a bad holiday", "tenant=acme holidays=2027-12-25,s3cret", "holidays: date 2 is not a date"},
		{"a missing holiday file", "tenant=acme holidays=s3cret.ics", "holidays: error reading the iCalendar file: it does not exist"},
		{"a bad holiday file", "tenant=acme holidays=testdata/s3cret-bad.ics", "holidays: in the iCalendar file, line 2: DTSTART: is missing"},
	} {
		file := "# defaults\n\n" + c.line + "\n"
		_, err := ParseDefaults(strings.NewReader(file), func(path string) ([]byte, error) {
			if path == "testdata/s3cret-bad.ics" {
				return []byte("BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:s3cret\nEND:VEVENT\nEND:VCALENDAR\n"), nil
			}
			return testFiles(path)
		}, Date{2027, 1, 1})
		require.Error(t, err, c.name)
		require.Equal(t, "line 3: "+c.want, err.Error()[:min(len(err.Error()), len("line 3: "+c.want))], "%s: %v", c.name, err)
		require.NotContains(t, strings.ToLower(err.Error()), "s3cret", c.name)
	}

	_, err := ParseDefaults(strings.NewReader("tenant=acme\n# again\ntenant=acme days=mon hours=08:00-09:00\n"), nil, Date{2027, 1, 1})
	require.EqualError(t, err, "line 3: tenant: is already given on line 1")

	_, err = ParseDefaults(strings.NewReader("tenant=acme holidays=x.ics\n"), nil, Date{2027, 1, 1})
	require.EqualError(t, err, "line 1: holidays: an iCalendar file cannot be read here")

	_, err = ParseDefaults(strings.NewReader("tenant=acme holidays=x.ics\n"), func(string) ([]byte, error) {
		return nil, fmt.Errorf("error opening s3cret: %w", fs.ErrPermission)
	}, Date{2027, 1, 1})
	require.EqualError(t, err, "line 1: holidays: error reading the iCalendar file: permission denied")

	_, err = ParseDefaults(strings.NewReader("tenant=acme holidays="+strings.Repeat("s3cret", 1<<18)+"\n"), nil, Date{2027, 1, 1})
	require.EqualError(t, err, "line 1: is too long")
}
