package sendwindow

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Default is what a tenant's reminders take when neither their update nor
// their subscriber names a window.
type Default struct {
	// Window is the default window; nil: none (a line gives days and
	// hours together or neither).
	Window *Window
	// TimeZone is the zone for a subscriber that names none ("": none).
	TimeZone string
	// Policy is the tenant's window policy (Next unless the line says).
	Policy Policy
	// Holidays are dates every window of the tenant skips, sorted and
	// distinct.
	Holidays []Date
	// Digest is the tenant's digest interval for email and webhook
	// subscribers whose update and subscriber name none (0: none).
	Digest time.Duration
}

// Defaults are the tenants' defaults, keyed by the tenant's name as the
// file writes it (the caller maps names to tenants).
type Defaults map[string]Default

// defaultsKeys are the settings a defaults line may give, in the order
// errors list them.
var defaultsKeys = []string{"tenant", "days", "hours", "time_zone", "policy", "holidays", "digest"}

// tenantPattern is the shape of a tenant's name: an id. Its twin is
// reminder's idPattern (reminder.IsID), which this package cannot import
// (reminder imports it).
var tenantPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// zonePattern is the shape of an IANA zone name; its twin is reminder's
// timeZonePattern (reminder.LoadTimeZone).
var zonePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9][A-Za-z0-9_+-]*)*$`)

// maxZoneBytes bounds a zone name, as reminder.LoadTimeZone does.
const maxZoneBytes = 64

// holidayYears is how far past the horizon ParseDefaults expands an
// iCalendar file's recurring holidays: reminders due within two years of
// start-up, and the horizon GoesOut looks past their due time.
const holidayYears = 2

// ParseDefaults reads the operator's file of tenant defaults: one line a
// tenant, '#' comments (a line's, or the rest of one) and blank lines
// ignored, settings as key=value separated by spaces:
//
//	# tenant=NAME [days=mon-fri hours=08:00-18:00] [time_zone=Europe/Berlin]
//	#             [policy=next|previous] [holidays=PATH.ics|2026-12-25,2026-12-26]
//	#             [digest=30m]
//	tenant=acme days=mon-fri hours=08:00-18:00 time_zone=Europe/Berlin holidays=de.ics
//
// days and hours make the default window and come together. digest is the
// tenant's digest interval (whole minutes, 1m to 24h). holidays is
// a list of dates, or the path (without spaces, ending in .ics) of an
// iCalendar file that readFile reads, expanded from today for Horizon
// and two years more (see ParseICal). Errors are "line N: field:
// problem" and never repeat a value, which may be a secret pasted in the
// wrong place.
func ParseDefaults(r io.Reader, readFile func(path string) ([]byte, error), today Date) (Defaults, error) {
	defaults := Defaults{}
	seen := map[string]int{} // tenant name: its line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		fields := strings.Fields(sc.Text())
		if i := slices.IndexFunc(fields, func(f string) bool { return strings.HasPrefix(f, "#") }); i >= 0 {
			fields = fields[:i]
		}
		if len(fields) == 0 {
			continue
		}
		name, d, err := parseDefault(fields, readFile, today)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if first, ok := seen[name]; ok {
			return nil, fmt.Errorf("line %d: tenant: is already given on line %d", n, first)
		}
		seen[name] = n
		defaults[name] = d
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: is too long", n+1)
		}
		return nil, fmt.Errorf("error reading window defaults: %w", err)
	}
	return defaults, nil
}

// parseDefault reads one line's settings: the tenant's name and its
// default. Errors are "field: problem".
func parseDefault(fields []string, readFile func(string) ([]byte, error), today Date) (string, Default, error) {
	set := map[string]string{}
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !slices.Contains(defaultsKeys, k) {
			return "", Default{}, fmt.Errorf("setting %d: want one of %s as key=value", i+1, strings.Join(defaultsKeys, ", "))
		}
		if _, dup := set[k]; dup {
			return "", Default{}, fmt.Errorf("%s: is given twice", k)
		}
		if v == "" {
			return "", Default{}, fmt.Errorf("%s: is empty", k)
		}
		set[k] = v
	}
	name, ok := set["tenant"]
	if !ok {
		return "", Default{}, errors.New("tenant: is required")
	}
	if !tenantPattern.MatchString(name) {
		return "", Default{}, errors.New("tenant: want letters, digits, '.', '_' or '-', at most 64 (a tenant is an id)")
	}
	var d Default
	var err error
	if d.Window, err = parseDefaultWindow(set["days"], set["hours"]); err != nil {
		return "", Default{}, err
	}
	if z, ok := set["time_zone"]; ok {
		if err := checkZone(z); err != nil {
			return "", Default{}, fmt.Errorf("time_zone: %w", err)
		}
		d.TimeZone = z
	}
	if d.Policy, err = ParsePolicy(set["policy"]); err != nil {
		return "", Default{}, fmt.Errorf("policy: %w", err)
	}
	if v, ok := set["digest"]; ok {
		every, err := time.ParseDuration(v)
		if err != nil || every < time.Minute || every > 24*time.Hour || every%time.Minute != 0 {
			return "", Default{}, errors.New(`digest: want whole minutes from 1m to 24h (like "30m")`)
		}
		d.Digest = every
	}
	if h, ok := set["holidays"]; ok {
		if d.Holidays, err = parseHolidays(h, readFile, today); err != nil {
			return "", Default{}, fmt.Errorf("holidays: %w", err)
		}
	}
	return name, d, nil
}

// parseDefaultWindow reads a line's days and hours ("" when not given):
// nil when neither is.
func parseDefaultWindow(days, hours string) (*Window, error) {
	switch {
	case days == "" && hours == "":
		return nil, nil
	case hours == "":
		return nil, errors.New("hours: is required with days (a default window names both)")
	case days == "":
		return nil, errors.New("days: is required with hours (a default window names both)")
	}
	var w Window
	var err error
	if w.Days, err = ParseDays(days); err != nil {
		return nil, fmt.Errorf("days: %w", err)
	}
	from, to, ok := strings.Cut(hours, "-")
	if !ok {
		return nil, errors.New(`hours: must be two times of day, like "08:00-18:00"`)
	}
	if w.From, err = ParseClock(from); err != nil {
		return nil, fmt.Errorf("hours: opening %w", err)
	}
	if w.To, err = ParseClock(to); err != nil {
		return nil, fmt.Errorf("hours: closing %w", err)
	}
	if err := w.Check(); err != nil {
		return nil, err // Check names days or hours
	}
	return &w, nil
}

// checkZone refuses a zone name that is not an IANA zone's: the shape
// first, so LoadLocation never sees a path, and never "Local" (the
// machine's zone, which differs between machines).
func checkZone(z string) error {
	if len(z) > maxZoneBytes || z == "Local" || !zonePattern.MatchString(z) {
		return errors.New(`is not an IANA time zone name (like "Europe/Berlin")`)
	}
	if _, err := time.LoadLocation(z); err != nil {
		return errors.New(`is not a time zone the IANA database knows (like "Europe/Berlin")`)
	}
	return nil
}

// parseHolidays reads a holidays setting: an iCalendar file's path, or a
// comma-separated list of dates. Errors never name the path or a date.
func parseHolidays(v string, readFile func(string) ([]byte, error), today Date) ([]Date, error) {
	if strings.HasSuffix(strings.ToLower(v), ".ics") {
		if readFile == nil {
			return nil, errors.New("an iCalendar file cannot be read here")
		}
		b, err := readFile(v)
		if err != nil {
			return nil, fmt.Errorf("error reading the iCalendar file: %s", fileProblem(err))
		}
		to := DateOf(time.Date(today.Year, today.Month, today.Day, 0, 0, 0, 0, time.UTC).Add(Horizon).AddDate(holidayYears, 0, 0))
		days, err := ParseICal(bytes.NewReader(b), today, to)
		if err != nil {
			return nil, fmt.Errorf("in the iCalendar file, %w", err)
		}
		return days, nil
	}
	var days []Date
	for i, s := range strings.Split(v, ",") {
		d, err := ParseDate(s)
		if err != nil {
			return nil, fmt.Errorf("date %d %w", i+1, err)
		}
		days = append(days, d)
	}
	slices.SortFunc(days, Date.Compare)
	return slices.Compact(days), nil
}

// fileProblem is what went wrong reading a file, without its path.
func fileProblem(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "it does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return "it cannot be read"
}
