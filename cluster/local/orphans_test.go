//go:build kafka

package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/internal/owner"
	"github.com/fencecheck/fencecheck/cluster/local"
)

// lingerJVM starts a process that looks to the reaper like a JVM of the
// cluster in dir (its command line names the folder and carries the
// cluster marker), in its own process group as the backend's JVMs are, with
// a child in that group. It returns the two pids; the test ends both.
func lingerJVM(t *testing.T, dir string) (leader, member int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-Dfencecheck.cluster=test", "-Djdk.net.hosts.file="+filepath.Join(dir, "b0", "hosts"))
	cmd.Env = append(os.Environ(), childEnv+"=linger")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() // collects it, so a killed leader does not stay a zombie
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, serr := fmt.Sscanf(line, "READY %d", &member); err != nil || serr != nil {
		t.Fatalf("linger child: %q, %v %v", line, err, serr)
	}
	return cmd.Process.Pid, member
}

// exited reports whether the process that had pid and label (owner.Label, taken while it ran)
// has exited: it is a zombie, gone, or its pid now names a later process. Pids are reused fast
// on a busy machine (pid_max is 32768 on CI's, and every JVM thread takes one), so a pid
// checked after its process was collected can belong to another process already.
func exited(pid int, label string) bool {
	return owner.Exited(pid) || owner.Gone(label, owner.Host())
}

// ownedDir makes a cluster folder in TMPDIR as New would, owned by label.
func ownedDir(t *testing.T, name, label string) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "fencecheck-kafka-"+name)
	if err := os.MkdirAll(filepath.Join(dir, "b0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if label != "" {
		if err := os.WriteFile(filepath.Join(dir, "fencecheck-owner"), []byte(label+"\n"+owner.Host()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// deadOwner returns the owner label of a process that has exited.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	label := owner.Label(cmd.Process.Pid) // taken while it runs (or just ran): its start time
	cmd.Wait()
	if !strings.Contains(label, "/") || strings.HasSuffix(label, "/") {
		label = fmt.Sprintf("%d/1", cmd.Process.Pid) // exited before it could be read
	}
	return label
}

// TestReapOrphans: the folder of a cluster whose owner is gone is removed
// after every JVM in it (and the rest of their process groups) is killed;
// the folder and JVM of a live owner, and a folder with no owner file (one a
// user gave), are left alone. No Kafka needed.
func TestReapOrphans(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // this test's orphans only, not another run's on this machine
	orphan := ownedDir(t, "orphan", deadOwner(t))
	live := ownedDir(t, "live", owner.Self())
	given := ownedDir(t, "given", "")
	oLeader, oMember := lingerJVM(t, orphan)
	lLeader, _ := lingerJVM(t, live)
	labels := map[int]string{oLeader: owner.Label(oLeader), oMember: owner.Label(oMember)}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reaped, err := local.ReapOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reaped, []string{orphan}) {
		t.Errorf("reaped %v, want only %s", reaped, orphan)
	}
	for _, pid := range []int{oLeader, oMember} {
		if !exited(pid, labels[pid]) {
			t.Errorf("pid %d of the orphaned cluster still runs", pid)
		}
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphaned folder %s still there (%v)", orphan, err)
	}
	if owner.Exited(lLeader) {
		t.Errorf("the JVM of a live owner's cluster (pid %d) was killed", lLeader)
	}
	for _, d := range []string{live, given} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("folder %s was removed: %v", d, err)
		}
	}
}

// TestNewReapsOrphans: starting a cluster first removes what a killed fencecheck left (its
// folder and the JVMs in it), so the next start after a kill -9 cleans up, whether or not it
// then succeeds. Here it fails at once (its "java" is false(1), which exits 1), so no Kafka
// JVM runs; only the jars must be there.
func TestNewReapsOrphans(t *testing.T) {
	needKafka(t)
	t.Setenv("TMPDIR", t.TempDir()) // this test's orphans only, not another run's on this machine
	orphan := ownedDir(t, "orphan", deadOwner(t))
	leader, member := lingerJVM(t, orphan)
	labels := map[int]string{leader: owner.Label(leader), member: owner.Label(member)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := local.New(ctx, local.Options{Java: "false"}); err == nil {
		t.Fatal("New started a cluster with false(1) as its java")
	}
	for _, pid := range []int{leader, member} {
		if !exited(pid, labels[pid]) {
			t.Errorf("pid %d of the orphaned cluster still runs after New", pid)
		}
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphaned folder %s still there after New (%v)", orphan, err)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "fencecheck-kafka-*")); len(left) != 0 {
		t.Errorf("folders left after the failed start: %v", left)
	}
}
