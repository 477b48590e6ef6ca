package letters

import (
	"fmt"
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

// words is what a language's letters say in code rather than in their
// templates: the names and the order a time is written with. Every
// language in Languages has one (TestEveryLanguageIsComplete), so a
// language added with templates alone fails a test instead of printing
// English dates.
type words struct {
	// Days are the weekdays' short names, Sunday first (time.Weekday).
	Days [7]string
	// Months are the months' short names, January first.
	Months [12]string
	// DateTime writes a time from its weekday, day of the month, month
	// and clock time ("15:04"), each already in this language.
	DateTime string
}

// text writes a time as the language does: fmt's indexed verbs take the
// weekday, the day of the month, the month and the clock time, in that
// order, so a language orders them as it likes.
func (w words) text(local time.Time) string {
	return fmt.Sprintf(w.DateTime, w.Days[local.Weekday()], local.Day(), w.Months[local.Month()-1], local.Format("15:04"))
}

// languages holds each language's words: one entry per language of
// Languages.
var languages = map[language.Tag]words{
	language.English: {
		Days:     [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"},
		Months:   [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"},
		DateTime: "%[1]s %[2]d %[3]s, %[4]s", // Tue 12 Jan, 08:00
	},
	language.German: {
		Days:     [7]string{"So.", "Mo.", "Di.", "Mi.", "Do.", "Fr.", "Sa."},
		Months:   [12]string{"Jan.", "Feb.", "März", "Apr.", "Mai", "Juni", "Juli", "Aug.", "Sep.", "Okt.", "Nov.", "Dez."},
		DateTime: "%[1]s %[2]d. %[3]s, %[4]s", // Di. 12. Jan., 08:00
	},
}

// Text is t in the clock's zone, written for a person in the clock's
// language (its words): "Tue 12 Jan, 08:00 CET" in English, "Di. 12.
// Jan., 08:00 CET" in German. The weekday places it; the data a template
// gets has the full date too.
func (c Clock) Text(t time.Time) string {
	w, ok := languages[c.Lang]
	if !ok {
		w = languages[language.English]
	}
	return w.text(t.In(c.Zone)) + " " + c.ZoneName(t)
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
