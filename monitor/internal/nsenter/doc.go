// Package nsenter runs a function on an OS thread inside another network
// namespace, so that the sockets it opens live there.
package nsenter
