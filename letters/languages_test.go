package letters

import (
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/language"
)

// Every language in Languages is complete: its words (day and month
// names, how it writes a time) and a template of each translated kind, in
// both parts. A language added with templates alone, or words alone,
// fails here rather than printing English dates or English letters.
func TestEveryLanguageIsComplete(t *testing.T) {
	t.Parallel()
	require.Equal(t, language.English, Languages[0], "English is the fallback, first")
	for _, lang := range Languages {
		t.Run(lang.String(), func(t *testing.T) {
			t.Parallel()
			w, ok := languages[lang]
			require.True(t, ok, "%s has no words in letters/clock.go's languages", lang)
			for i, d := range w.Days {
				require.NotEmpty(t, d, "%s: day %s", lang, time.Weekday(i))
			}
			for i, m := range w.Months {
				require.NotEmpty(t, m, "%s: month %s", lang, time.Month(i+1))
			}
			for _, verb := range []string{"%[1]s", "%[2]d", "%[3]s", "%[4]s"} {
				require.Contains(t, w.DateTime, verb, "%s: DateTime writes the weekday, day, month and time", lang)
			}
			at := time.Date(2027, 5, 3, 8, 0, 0, 0, time.UTC)
			text := Clock{Zone: time.UTC, Lang: lang}.Text(at)
			require.NotContains(t, text, "%!", "%s: DateTime's verbs fit its values", lang)
			require.Contains(t, text, w.Days[at.Weekday()], lang)
			require.Contains(t, text, w.Months[at.Month()-1], lang)
			require.True(t, strings.HasSuffix(text, "08:00 UTC"), text)

			for _, kind := range translated {
				for _, part := range []string{".html", ".txt"} {
					_, err := fs.Stat(files, "templates/"+lang.String()+"/"+kind+part)
					require.NoError(t, err, "%s has no %s%s template", lang, kind, part)
				}
				_, ok := sets[lang][kind]
				require.True(t, ok, "%s: %s parsed", lang, kind)
			}
		})
	}
	for lang := range languages {
		_, listed := sets[lang]
		require.True(t, listed, "%s has words but is not in Languages", lang)
	}
}
