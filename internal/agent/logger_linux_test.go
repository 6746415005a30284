package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestNewLogger: logfmt (and "text", its old name) or JSON, each line
// with the time, level, caller and message; a debug line only at debug;
// a bad level or format names the flag and what it takes.
func TestNewLogger(t *testing.T) {
	for _, format := range []string{"logfmt", "text"} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, "info", format)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		log.Debug("hidden")
		log.Info("shown", "ip", "10.0.0.1")
		line := buf.String()
		for _, want := range []string{"time=", "level=INFO", "source=logger_linux_test.go:", `msg=shown`, "ip=10.0.0.1"} {
			if !strings.Contains(line, want) {
				t.Errorf("%s: %q lacks %q", format, line, want)
			}
		}
		if strings.Contains(line, "hidden") || strings.Count(line, "\n") != 1 {
			t.Errorf("%s at info: %q, want the info line only", format, line)
		}
	}
	var buf bytes.Buffer
	log, err := newLogger(&buf, "debug", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("shown")
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("json: %q: %v", buf.String(), err)
	}
	if m["level"] != "DEBUG" || m["msg"] != "shown" || m["time"] == nil || m["source"] == nil {
		t.Errorf("json line %v: want time, level DEBUG, source and msg", m)
	}
	for _, tc := range []struct{ level, format, want string }{
		{"verbose", "json", `--log.level "verbose": want debug, info, warn or error`},
		{"info", "xml", `--log.format "xml": want logfmt or json`},
	} {
		if _, err := newLogger(&buf, tc.level, tc.format); err == nil || err.Error() != tc.want {
			t.Errorf("level %q format %q: %v, want %q", tc.level, tc.format, err, tc.want)
		}
	}
}
