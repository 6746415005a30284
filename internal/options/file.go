package options

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/neighwatch/neighwatch/internal/quote"
	yaml2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// ReadFile reads a YAML configuration file whose keys are the table's
// flag names without dashes (remediation: "on", stale-threshold: 90s,
// exclude-interfaces: [lxc.*, veth.*]) and returns each value as the
// flag would take it. Unknown keys, the keys of the options that name
// the file (NotInFile), nested maps and nulls are errors that name the
// key.
func (o *Table) ReadFile(path string) (map[string]string, error) {
	b, err := Read(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		if k := nonFinite(b); k != "" {
			if o.fs.Lookup(k) == nil {
				k = quote.Input(k) // not an option's name: any text, of any length
			}
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
		f := o.fs.Lookup(k)
		if f == nil || o.notInFile[k] {
			return nil, fmt.Errorf("config file %s: unknown key %s (keys are the %s command's flag names without dashes; see its --help)", path, quote.Input(k), o.fs.Name())
		}
		val := raw[k]
		if b, ok := val.(bool); ok && takesWords(f) {
			// YAML 1.1 reads a bare on/off as a boolean: a flag that
			// takes words (remediation, tracer) means the word.
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

// Read reads a configuration file: ReadBytes. A test replaces it with a
// read that never returns, as one from a hung network mount would not.
var Read = ReadBytes

// NotInFile marks options that a configuration file may not set (the
// option that names the file).
func (o *Table) NotInFile(names ...string) {
	if o.notInFile == nil {
		o.notInFile = map[string]bool{}
	}
	for _, n := range names {
		o.notInFile[n] = true
	}
}

// takesWords says the flag's values are words its package parses (a
// ParsedValue: off, on, auto).
func takesWords(f *flag.Flag) bool {
	w, ok := f.Value.(interface{ takesWords() bool })
	return ok && w.takesWords()
}

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

// MaxFile is the largest configuration file the agent reads: a
// Kubernetes ConfigMap holds at most 1 MiB, and the agent's own options
// fill a few kilobytes.
const MaxFile = 1 << 20

// ReadBytes reads the configuration file, at most MaxFile
// bytes of a regular file. It opens without blocking and refuses what is
// not a regular file: a FIFO would hold the start (and the reload loop)
// until someone writes to it, and /dev/zero never ends.
func ReadBytes(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): give a file", path, fi.Mode().Type())
	}
	if fi.Size() > MaxFile {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a configuration file may hold: the agent's options fill a few kilobytes", path, fi.Size(), MaxFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFile {
		return nil, fmt.Errorf("%s grew past the %d bytes a configuration file may hold while it was read", path, MaxFile)
	}
	return b, nil
}
