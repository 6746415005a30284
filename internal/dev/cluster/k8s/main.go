// Command nwk8s is the single-node Kubernetes of make test-cluster: one
// executable that links etcd and Kubernetes' own components, as k3s
// does, so their shared packages compile once. It runs one component a
// process, named by its first argument (or by the name it is called
// by): etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kubelet or kubectl, each with that component's own flags.
//
// It lives in a module of its own, outside go.work, so that neither the
// agent nor the other tooling resolves Kubernetes' dependencies.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

const usage = "usage: nwk8s etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl [FLAGS]"

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args
	// Called as itself (nwk8s, or a name starting so, as Build names
	// it), the component is the first argument.
	if strings.HasPrefix(name, "nwk8s") {
		if len(args) < 2 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		name, args = args[1], args[1:]
	}
	// Each component's command parses os.Args[1:] itself.
	os.Args = args
	switch name {
	case "etcd":
		etcdmain.Main(args)
		os.Exit(0)
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	case "kubectl":
		os.Exit(cli.Run(kubectl.NewDefaultKubectlCommand()))
	}
	fmt.Fprintf(os.Stderr, "nwk8s: no component %q\n%s\n", name, usage)
	os.Exit(2)
}
