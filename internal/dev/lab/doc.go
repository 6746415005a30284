// Package lab builds the three-namespace network of problem.md for tests
// and demos: client <-> node <-> backend over veth pairs, with helpers to
// move a host's MAC behind the node's back, set static entries and create
// many entries. Everything it creates is removed by Close.
package lab
