// Package e2e holds neighwatch's end-to-end tests: the agent binary, built
// once per run, in network namespaces and veths the tests create, against
// the real kernel, Prometheus, Alertmanager and podman. One file per
// capability it proves (mismatch_linux_test.go, manage_linux_test.go,
// foreign_forwarders_linux_test.go, ...); harness_linux_test.go starts
// agents and reads them. Run as root; elsewhere the tests skip, saying
// why.
package e2e
