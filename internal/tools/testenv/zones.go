package testenv

import (
	"fmt"
	"time"
)

// MiddayZone is an Etc/GMT zone in which now is about noon, with its
// location: a send window of minutes or an hour around now, in it, never
// crosses a local midnight, whenever the test runs.
func MiddayZone(now time.Time) (string, *time.Location) {
	east := (12 - now.UTC().Hour() + 24) % 24 // hours ahead of UTC
	if east > 12 {
		east -= 24
	}
	name := "Etc/GMT"
	switch {
	case east > 0:
		name = fmt.Sprintf("Etc/GMT-%d", east) // POSIX signs: GMT-5 is 5 hours ahead
	case east < 0:
		name = fmt.Sprintf("Etc/GMT+%d", -east)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(fmt.Sprintf("testenv: the zone database has no %s: %v", name, err))
	}
	return name, loc
}
