// Package addrs reads the interfaces' own addresses (RTM_GETADDR) and
// names from them the segment a neighbour is on: the subnet its node
// reaches it through. Nodes on one segment share the subnet; two hosts
// that share an address and a MAC on two segments (a VRRP router's
// virtual MAC and address, repeated in another VLAN) are told apart by
// it.
package addrs
