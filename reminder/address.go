package reminder

// CheckEmail checks an email address as a subscriber's is checked (an
// operator naming a suppressed address, say); the error names field.
func CheckEmail(field, addr string) error { return checkEmail(field, addr) }
