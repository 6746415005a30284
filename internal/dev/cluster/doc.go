// Package cluster runs a single-node Kubernetes for make test-cluster:
// etcd, the API server, the controller manager, the scheduler, Debian's
// containerd and the kubelet, built from Kubernetes' own modules (Build)
// and started in a network namespace and a mount namespace of the node's
// own (Start), so that the chart is installed, admitted, scheduled and
// run as on an operator's node, and the host is left as it was found
// (Close checks it).
package cluster
