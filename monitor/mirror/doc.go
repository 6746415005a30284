// Package mirror keeps the table an exact, live copy of one network
// namespace's kernel neighbour tables (ARP and NDP), from one netlink socket
// that carries both the notifications and its own dumps, and follows the
// interfaces whose entries belong in it.
package mirror
