// Package rtnl splits rtnetlink datagrams into messages and messages into
// route attributes, without allocating and without panicking on malformed
// input. Decoding a message's meaning is left to its reader.
package rtnl
