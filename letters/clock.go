package letters

import (
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/shipnotify/shipnotify/reminder"
)

// Languages are the languages the default letters are written in, the
// fallback first.
var Languages = []language.Tag{language.English, language.German}

var matcher = language.NewMatcher(Languages)

// Audience is who reads a letter: their language and time zone as the
// subscriber gave them (BCP 47, IANA; "" for English and UTC).
type Audience struct {
	Locale, TimeZone string
}

// Language is the default letters' language for a locale: the closest of
// Languages, English when none is close ("fr" reads English, "de-AT"
// German).
func Language(locale string) language.Tag {
	tag, err := reminder.ParseLocale(locale)
	if err != nil {
		return language.English
	}
	_, i, conf := matcher.Match(tag)
	if conf == language.No {
		return language.English
	}
	return Languages[i]
}

// Clock states times in a reader's zone and language, the zone named. Zone
// abbreviations stay as the IANA database spells them ("CET", not "MEZ"):
// readers of either language know them, and they name one zone.
type Clock struct {
	Zone *time.Location
	Lang language.Tag
}

// NewClock is the clock of an audience. A zone the database no longer
// knows (the mirror holds one an older tzdata knew) reads UTC rather than
// failing the send.
func NewClock(a Audience) Clock {
	zone, err := reminder.LoadTimeZone(a.TimeZone)
	if err != nil {
		zone = time.UTC
	}
	return Clock{Zone: zone, Lang: Language(a.Locale)}
}

var (
	germanDays   = [...]string{"So.", "Mo.", "Di.", "Mi.", "Do.", "Fr.", "Sa."}
	germanMonths = [...]string{"Jan.", "Feb.", "März", "Apr.", "Mai", "Juni", "Juli", "Aug.", "Sep.", "Okt.", "Nov.", "Dez."}
)

// Text is t in the clock's zone, written for a person: "Tue 12 Jan,
// 08:00 CET" in English, "Di. 12. Jan., 08:00 CET" in German. The weekday
// places it; the data a template gets has the full date too.
func (c Clock) Text(t time.Time) string {
	local := t.In(c.Zone)
	zone := c.ZoneName(t)
	if c.Lang == language.German {
		return germanDays[local.Weekday()] + " " + local.Format("2.") + " " + germanMonths[local.Month()-1] + ", " +
			local.Format("15:04") + " " + zone
	}
	return local.Format("Mon 2 Jan, 15:04") + " " + zone
}

// ZoneName is the zone's abbreviation at t ("CET", "CEST", "EST"), or its
// offset from UTC where the database has no abbreviation ("UTC+04").
func (c Clock) ZoneName(t time.Time) string {
	name, _ := t.In(c.Zone).Zone()
	if strings.HasPrefix(name, "+") || strings.HasPrefix(name, "-") {
		return "UTC" + name
	}
	return name
}

// Local is t in the clock's zone as RFC 3339, its offset kept
// ("2027-01-12T08:00:00+01:00"), for a template to format as it likes.
func (c Clock) Local(t time.Time) string { return t.In(c.Zone).Format(time.RFC3339) }

// UTC is t in UTC as RFC 3339.
func UTC(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ZoneLabel names the clock's zone for a footnote: "Europe/Berlin", "UTC".
func (c Clock) ZoneLabel() string { return c.Zone.String() }
