// Command fencecheck runs fencing-safety scenarios against a Kafka lease transport, checks the
// recorded histories and writes reports. Run `fencecheck help` for the commands.
//
// Exit codes (docs/checker.md, "Verdicts and exit codes"): 0 valid, 1 invalid, 2 unknown or inconclusive, 254 usage error,
// 255 harness error.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fencecheck/fencecheck/checker"
)

func main() {
	// A closed stdout or stderr (fencecheck run | head) must not stop a run before it heals,
	// reads, checks and writes its results: Go kills a program that writes to a broken pipe on
	// fd 1 or 2 unless SIGPIPE is notified, and then the write fails with EPIPE instead, which
	// the console output ignores.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the process exit code.
func run(args []string) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.Execute()
	var ex *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ex):
		if ex.err != nil {
			fmt.Fprintln(os.Stderr, "fencecheck:", ex.err)
		}
		return ex.code
	case strings.HasPrefix(err.Error(), "unknown command "):
		// The root's own: cobra's message already carries its suggestions.
		msg, suggestions, ok := strings.Cut(err.Error(), "\n\nDid you mean this?")
		if ok {
			msg += "; did you mean " + strings.Join(strings.Fields(suggestions), " or ") + "?"
		}
		fmt.Fprintln(os.Stderr, "fencecheck:", msg, "(see fencecheck --help)")
		return checker.ExitUsage
	default:
		fmt.Fprintln(os.Stderr, "fencecheck:", err)
		return checker.ExitHarness
	}
}

// exitError carries an exit code out of a command. A nil err prints nothing (the command has
// already said what happened).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr marks bad flags, arguments or scenario files: exit code 254.
func usageErr(format string, args ...any) error {
	return &exitError{code: checker.ExitUsage, err: fmt.Errorf(format, args...)}
}

// harnessErr marks a failure of the harness itself: exit code 255.
func harnessErr(err error) error {
	return &exitError{code: checker.ExitHarness, err: err}
}

// verdictExit turns a run's verdict into the command's exit, printing nothing more.
func verdictExit(v checker.Verdict) error {
	if code := checker.ExitCode(v); code != 0 {
		return &exitError{code: code}
	}
	return nil
}
