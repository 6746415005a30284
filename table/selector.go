package table

import "regexp"

// Selector picks interfaces by name: an interface is selected when it
// matches any Include regex (or Include is empty) and no Exclude regex.
// The zero Selector selects every interface.
type Selector struct {
	Include, Exclude []*regexp.Regexp
}

// Match reports whether the interface name is selected.
func (s Selector) Match(name string) bool {
	ok := len(s.Include) == 0
	for _, re := range s.Include {
		if re.MatchString(name) {
			ok = true
			break
		}
	}
	if !ok {
		return false
	}
	for _, re := range s.Exclude {
		if re.MatchString(name) {
			return false
		}
	}
	return true
}
