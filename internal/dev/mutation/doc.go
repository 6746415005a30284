// Package mutation runs mutation testing (gremlins) over neighwatch's
// decision code and judges the result: every mutant that survives is
// killed by a test or named, with the reason it changes nothing, in
// docs/mutants.md. cmd/nwmutants is the driver behind `make mutation`.
package mutation
