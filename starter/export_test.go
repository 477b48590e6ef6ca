package starter

// CrashAfterMirror makes Schedule stop with err after the mirror write and
// before any workflow start, as a starter killed between the two would.
func (s *Starter) CrashAfterMirror(err error) {
	s.afterMirror = func() error { return err }
}
