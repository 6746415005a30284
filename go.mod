module github.com/neighwatch/neighwatch

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/josharian/native v1.1.0 // indirect
	github.com/mdlayher/arp v0.0.0-20220512170110-6706a2966875 // indirect
	github.com/mdlayher/ethernet v0.0.0-20220221185849-529eae5b6118 // indirect
	github.com/mdlayher/ndp v1.1.0 // indirect
	github.com/mdlayher/packet v1.2.0 // indirect
	github.com/mdlayher/socket v0.7.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/common v0.73.1 // indirect
	github.com/prometheus/exporter-toolkit v0.20.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
