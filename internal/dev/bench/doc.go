// Package bench holds neighwatch's scripted benchmark runs (see
// BENCHMARKS.md); cmd/nwbench is the driver.
package bench
