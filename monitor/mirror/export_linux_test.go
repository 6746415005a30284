package mirror

// HoldLinks blocks the mirror's link updates until the returned function
// runs: a test holds them to fill the link socket until it overflows.
func HoldLinks(m *Mirror) (release func()) {
	m.linkMu.Lock()
	return m.linkMu.Unlock
}
