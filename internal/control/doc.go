// Package control is the agent's local control API: HTTP over a Unix
// socket, serving the table and the event stream to the neighwatch client
// subcommands.
package control

// DefaultSocket is where the agent serves its control API, and where the
// client looks for it.
const DefaultSocket = "/run/neighwatch/neighwatch.sock"
