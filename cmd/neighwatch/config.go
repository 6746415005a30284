package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	yaml2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// readConfigFile reads a YAML configuration file whose keys are the
// agent's flag names without dashes (remediation: "on",
// stale-threshold: 90s, exclude-interfaces: [lxc.*, veth.*]) and returns
// each value as the flag would take it. Unknown keys, nested maps and
// nulls are errors that name the key.
func readConfigFile(path string, fs *flag.FlagSet) (map[string]string, error) {
	b, err := readConfig(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		if k := nonFinite(b); k != "" {
			return nil, fmt.Errorf("config file %s: %s: .nan and .inf are not values any option takes: give a finite number", path, k)
		}
		return nil, fmt.Errorf("config file %s: %s", path, oneLine(err.Error()))
	}
	var raw map[string]any
	if err := json.Unmarshal(j, &raw); err != nil {
		return nil, fmt.Errorf("config file %s: want a map of flag names to values: %v", path, err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(raw))
	for _, k := range keys {
		if fs.Lookup(k) == nil || k == "config.file" {
			return nil, fmt.Errorf("config file %s: unknown key %q (keys are the agent's flag names without dashes; see neighwatch agent --help)", path, k)
		}
		val := raw[k]
		if b, ok := val.(bool); ok && k == "remediation" {
			// YAML 1.1 reads a bare on/off as a boolean.
			val = map[bool]string{true: "on", false: "off"}[b]
		}
		v, err := flagValue(val)
		if err != nil {
			return nil, fmt.Errorf("config file %s: %s: %v", path, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// oneLine joins the lines of a parser's error ("yaml: unmarshal
// errors:\n  line 2: ...") into one, at most 512 bytes of it.
func oneLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	s = strings.Join(lines, " ")
	if len(s) > 512 {
		s = s[:512] + "..."
	}
	return s
}

// readConfig reads the file; a test replaces it with a read that never
// returns, as one from a hung network mount would not.
var readConfig = readConfigBytes

// nonFinite returns the first key whose value (or an element of it) is a
// YAML .nan or .inf, which JSON cannot hold: the conversion's own error
// names the value but not the key.
func nonFinite(b []byte) string {
	var doc yaml2.MapSlice
	if yaml2.Unmarshal(b, &doc) != nil {
		return ""
	}
	var bad func(v any) bool
	bad = func(v any) bool {
		switch v := v.(type) {
		case float64:
			return math.IsNaN(v) || math.IsInf(v, 0)
		case []any:
			for _, e := range v {
				if bad(e) {
					return true
				}
			}
		}
		return false
	}
	for _, it := range doc {
		if bad(it.Value) {
			return fmt.Sprint(it.Key)
		}
	}
	return ""
}

// flagValue renders one YAML value as a flag's text: a string, number or
// bool as it reads, a list of those comma-separated.
func flagValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			s, err := flagValue(e)
			if err != nil {
				return "", err
			}
			if _, nested := e.([]any); nested {
				return "", fmt.Errorf("a list inside a list")
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case nil:
		return "", fmt.Errorf("no value (remove the key for the default)")
	}
	return "", fmt.Errorf("want a string, number, bool or list, got %T", v)
}
