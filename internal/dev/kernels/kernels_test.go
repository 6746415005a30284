package kernels

import (
	"strings"
	"testing"
)

func TestArchiveURI(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"deb822", `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
`, "http://deb.debian.org/debian"},
		{"deb822 security first", `Types: deb
URIs: http://security.example/debian-security/
Suites: bookworm-security
Components: main

Types: deb
URIs: http://mirror.example/debian/
Suites: bookworm
Components: contrib main
`, "http://mirror.example/debian"},
		{"one-line", "deb http://security.debian.org/ bookworm-security main\n" +
			"deb [arch=amd64 signed-by=/k.gpg] http://ftp.example/debian bookworm main non-free\n", "http://ftp.example/debian"},
		{"no main", "deb http://ftp.example/debian bookworm contrib\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ArchiveURI(strings.NewReader(tc.in))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
