// Package options declares a command's flags once, in a Table: each
// option's name, default, range, help and whether a reload applies it
// live. The flags, the configuration file (keys are the flag names), the
// range checks, the reload's live-or-restart split and docs/running.md's flag
// table all read the one list. It knows nothing of what the options
// configure.
package options
