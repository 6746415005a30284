package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/options"
)

// hungConfig makes the test binary, run again as a child, the agent with a
// configuration read that never returns.
const hungConfig = "NEIGHWATCH_TEST_HUNG_CONFIG"

func TestMain(m *testing.M) {
	if os.Getenv(hungConfig) != "" {
		options.Read = func(string) ([]byte, error) {
			fmt.Println("reading the configuration")
			select {}
		}
		os.Args = append([]string{"neighwatch", "agent", "--config.file"}, os.Getenv(hungConfig))
		main()
		return
	}
	os.Exit(m.Run())
}

// TestSignalsStopAHungConfigLoad: SIGTERM and SIGINT end the agent while
// its configuration read hangs, with one line saying so. They were
// trapped before the load and nothing watched them until it returned, so
// a FIFO (or a hung mount) as the file needed SIGKILL.
func TestSignalsStopAHungConfigLoad(t *testing.T) {
	if testing.Short() {
		// make arm64 runs the package under qemu-user with -short,
		// where the binary cannot run itself and the forked child that
		// finds so can hang: the run of 2026-12-07 waited on it until
		// the 10-minute timeout. go test without -short (make test,
		// CI) runs this test natively.
		t.Skip("runs this test binary again as a child process: not under -short")
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), hungConfig+"="+filepath.Join(t.TempDir(), "config.yaml"))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// An agent that ignores the signal never exits: kill it when
			// the test is about to time out, and fail.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if dl, ok := t.Deadline(); ok {
				ctx, cancel = context.WithDeadline(ctx, dl.Add(-10*time.Second))
				defer cancel()
			}
			go func() {
				<-ctx.Done()
				_ = cmd.Process.Kill()
			}()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "reading the configuration\n" {
				t.Fatalf("the child did not reach the read: %q, %v (stderr %q)", line, err, stderr.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("after %v: %v, want exit status 1 (stderr %q)", sig, err, stderr.String())
			}
			msg := strings.TrimSpace(stderr.String())
			t.Log(msg)
			if !strings.Contains(msg, "while reading the configuration") || strings.Contains(msg, "\n") {
				t.Errorf("stderr %q: want one line saying the load was stopped", msg)
			}
		})
	}
}
