package options

import "testing"

// TestInterfaceRegexMatchesTheWholeName: an interface regex is matched
// against the whole name (docs/running.md, --interfaces): "eth0" selects eth0,
// not veth0 nor eth01.
func TestInterfaceRegexMatchesTheWholeName(t *testing.T) {
	var r RegexList
	if err := r.Set("eth0,lxc.*"); err != nil {
		t.Fatal(err)
	}
	match := func(name string) bool {
		for _, re := range r {
			if re.MatchString(name) {
				return true
			}
		}
		return false
	}
	for name, want := range map[string]bool{"eth0": true, "veth0": false, "eth01": false, "lxc12ab": true, "xlxc1": false} {
		if got := match(name); got != want {
			t.Errorf("%s: matched %v, want %v", name, got, want)
		}
	}
}
