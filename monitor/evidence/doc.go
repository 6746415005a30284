// Package evidence listens to ARP and NDP on the watched interfaces and
// tells the table where each host was last seen: an IP at a MAC other than
// its entry's lladdr is the black-hole signature (mismatch), and two MACs
// answering for one IP within a window are a conflict.
package evidence
