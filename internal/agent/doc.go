// Package agent wires the monitor, the metrics endpoint and the control
// socket into the long-running neighwatch agent.
package agent
