package starter

// CrashAfterMirror makes Schedule stop with err after the mirror write and
// before any workflow start, as a starter killed between the two would.
func (s *Starter) CrashAfterMirror(err error) {
	s.afterMirror = func() error { return err }
}

// BetweenMirrorAndStart runs fn between Schedule's mirror write and its
// workflow starts, as a concurrent caller would act there; an error from fn
// aborts the schedule.
func (s *Starter) BetweenMirrorAndStart(fn func() error) {
	s.afterMirror = fn
}

// ReminderAttributes reads a reminder workflow's state and due time from
// its search attributes.
var ReminderAttributes = reminderAttributes
