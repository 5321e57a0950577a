package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/cluster/internal/owner"
)

// A cluster folder New makes (Options.Dir empty) is named tempPrefix* in
// os.TempDir() and holds ownerFile: the owner's label (owner.Label) on the
// first line and its host (owner.Host) on the second. A SIGKILL of the owner
// leaves the folder, and whatever JVM outlived it, to ReapOrphans.
const (
	tempPrefix = "fencecheck-kafka-"
	ownerFile  = "fencecheck-owner"
)

// jvmMarker is in the command line of every JVM kraft starts.
const jvmMarker = "-Dfencecheck.cluster="

// reapTimeout bounds the wait for killed JVMs to exit when ctx has no
// earlier deadline: a SIGKILLed process exits within milliseconds unless the
// kernel is stuck, and a folder is only removed once nothing runs in it.
const reapTimeout = 30 * time.Second

// makeOwnedDir makes a temporary cluster folder and records this process as
// its owner.
func makeOwnedDir() (string, error) {
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner.Self()+"\n"+owner.Host()+"\n"), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// ReapOrphans removes what the local clusters of fencecheck processes that
// are gone (killed before they could close them) left behind: every
// process whose command line names such a cluster's folder is killed with
// its process group, and once they have exited the folder is removed. It
// returns the folders removed. Only folders New made (temporary ones with
// an owner file) are touched, never one given in Options.Dir; New does the
// same before it starts a cluster.
func ReapOrphans(ctx context.Context) ([]string, error) {
	return reapOrphans(ctx, slog.New(slog.DiscardHandler))
}

func reapOrphans(ctx context.Context, log *slog.Logger) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, reapTimeout)
		defer cancel()
	}
	var reaped []string
	var errs []error
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not a local cluster's folder, or one still being made
		}
		label, host, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if !owner.Gone(label, host) {
			continue // its owner runs, or it cannot be told here
		}
		pids := processesNaming(dir + string(filepath.Separator))
		log.Info("removing the local cluster of a fencecheck process that is gone", "dir", dir, "owner", label, "pids", pids)
		if err := killAndWait(ctx, pids); err != nil {
			errs = append(errs, fmt.Errorf("reap %s: %w", dir, err))
			continue // a folder in use stays: removing it under a live JVM helps nobody
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("reap %s: %w", dir, err))
			continue
		}
		reaped = append(reaped, dir)
	}
	return reaped, errors.Join(errs...)
}

// processesNaming returns the pids of this backend's JVMs (their command
// line has -Dfencecheck.cluster=) whose command line contains s; another
// process that happens to name the folder, a viewer of a broker log say, is
// left alone.
func processesNaming(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), s) && strings.Contains(string(cmd), jvmMarker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killAndWait SIGKILLs each process (its whole group when it leads one, as
// every JVM of this backend does) and waits until all have exited, the other
// members of those groups too: kill(2) returns before its target is gone.
func killAndWait(ctx context.Context, pids []int) error {
	var groups []int
	for _, pid := range pids {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			groups = append(groups, pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		} else {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var left []int
		for _, pid := range pids {
			if !owner.Exited(pid) {
				left = append(left, pid)
			}
		}
		left = append(left, groupMembers(groups)...)
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pids %v still running after SIGKILL: %w", left, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// groupMembers returns the processes still running in any of the process
// groups pgids.
func groupMembers(pgids []int) []int {
	if len(pgids) == 0 {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && owner.InGroup(pid, pgids) {
			out = append(out, pid)
		}
	}
	return out
}
