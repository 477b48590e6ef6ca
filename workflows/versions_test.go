package workflows

import (
	"maps"
	"testing"
)

// TestTheCurrentLevelKnowsEveryChangeAtItsLatest: a reminder the starter
// starts today asks GetVersion for nothing, so the current level must name
// every change at its latest version. A change added to latest without a
// new level (and an old level edited instead) fails here.
func TestTheCurrentLevelKnowsEveryChangeAtItsLatest(t *testing.T) {
	current, ok := levels[CurrentLevel]
	if !ok {
		t.Fatalf("CurrentLevel %d has no versions in levels", CurrentLevel)
	}
	if !maps.Equal(current, latest) {
		t.Fatalf("level %d runs %v, and the latest versions are %v: add the change to a new level and raise CurrentLevel", CurrentLevel, current, latest)
	}
	for level, versions := range levels {
		for id, v := range versions {
			if l, ok := latest[id]; !ok || v > l {
				t.Errorf("level %d runs %s at %d, past its latest (%d)", level, id, v, l)
			}
		}
	}
}
