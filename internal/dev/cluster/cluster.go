package cluster

// NodeName is the node's name in the API.
const NodeName = "nwk8s-node"

// The node's address ranges: the Services' (serviceIP is the kubernetes
// Service's) and the pods' of their own network.
const (
	serviceRange = "10.96.0.0/16"
	serviceIP    = "10.96.0.1"
	podRange     = "10.244.0.0/24"
	// The image of every pod's sandbox, pushed by the node to its own
	// registry and pulled from there, as a kubeadm node pulls
	// registry.k8s.io/pause.
	pauseTag = "pause:3.10.1"
)
