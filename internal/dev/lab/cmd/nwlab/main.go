// Command nwlab builds or removes the demo lab of problem.md:
//
//	nwlab up     create client <-> node <-> backend namespaces
//	nwlab down   remove them
//	nwlab move   give the client a new MAC behind the node's back
package main

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

const stateFile = "/run/neighwatch-lab"

const usage = `usage: nwlab up|down|move

  up     create the client <-> node <-> backend namespaces (root)
  down   remove them
  move   give the client a new MAC behind the node's back
`

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--help" || os.Args[1] == "-h" || os.Args[1] == "help") {
		fmt.Print(usage)
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "nwlab: %v\n", err)
		os.Exit(1)
	}
}

func load() (*lab.Lab, error) {
	b, err := os.ReadFile(stateFile)
	if err != nil {
		return nil, fmt.Errorf("no lab is up (%v)", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return nil, fmt.Errorf("%s is corrupt", stateFile)
	}
	return lab.Attach(f[0], f[1], f[2]), nil
}

func run(args []string) error {
	if ok, why := lab.Privileged(); !ok {
		return fmt.Errorf("the lab %s", why)
	}
	if len(args) != 1 {
		return fmt.Errorf("usage: nwlab up|down|move")
	}
	switch args[0] {
	case "up":
		if _, err := os.Stat(stateFile); err == nil {
			return fmt.Errorf("a lab is already up (%s); run nwlab down first", stateFile)
		}
		l, err := lab.Build("lab")
		if err != nil {
			return err
		}
		if err := l.PinClientToNode(); err != nil {
			l.Close()
			return err
		}
		if err := os.WriteFile(stateFile, []byte(l.Client.Name+" "+l.Node.Name+" "+l.Backend.Name+"\n"), 0o644); err != nil {
			l.Close()
			return err
		}
		fmt.Printf("lab up: client %s, node %s, backend %s\n", l.Client.Name, l.Node.Name, l.Backend.Name)
		fmt.Printf("run the agent on the node:  ip netns exec %s ./bin/neighwatch agent --stale-threshold 10s\n", l.Node.Name)
		fmt.Printf("traffic:                    ip netns exec %s ping 10.0.2.2\n", l.Client.Name)
	case "down":
		l, err := load()
		if err != nil {
			return err
		}
		l.Close()
		return os.Remove(stateFile)
	case "move":
		l, err := load()
		if err != nil {
			return err
		}
		mac := net.HardwareAddr{0x02, 0x6e, 0x77, 0x00, 0x00, byte(os.Getpid())}
		if err := l.MoveClientMAC(mac); err != nil {
			return err
		}
		fmt.Printf("client now at %s; the node was not told\n", mac)
	default:
		return fmt.Errorf("unknown command %q: want up, down or move", args[0])
	}
	return nil
}
