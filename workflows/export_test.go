package workflows

// Change ids a test pins to run a path reminders of an earlier release take.
const (
	ChangeCancelSettlesTheSend = changeCancelSettlesTheSend
	ChangeAcceptedFirst        = changeAcceptedFirst
)
