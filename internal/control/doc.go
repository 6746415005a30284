// Package control is the agent's local control API: HTTP over a Unix
// socket, serving the table and the event stream to the neighwatch client
// subcommands.
package control
