package workload

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
)

// fleetLayout lays out procs processes, each a member of one of roles roles (members
// processes per role), with readers readers, as layout does, without a cluster.
func fleetLayout(procs, roles, readers int) (*Workload, []history.LogID) {
	cfg, _ := Preset(PresetLow)
	cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers = procs, roles, procs/roles, readers
	wl := &Workload{cfg: cfg}
	for i := range procs {
		wl.procs = append(wl.procs, &process{n: i + 1, name: fmt.Sprintf("p%d", i+1)})
	}
	for i := range readers {
		wl.readers = append(wl.readers, &reader{proc: wl.procs[i%procs]}) // as layout places them
	}
	var logs []history.LogID
	for r := range roles {
		role := fmt.Sprintf("r%d", r+1)
		logs = append(logs, history.RoleLog(role))
		for j := range cfg.MembersPerRole {
			wl.members = append(wl.members, &member{proc: wl.procs[cfg.processOf(r, j)-1], role: role, workP: int32(r) % cfg.workPartitions()})
		}
	}
	for p := range cfg.workPartitions() {
		logs = append(logs, history.WorkLog(p))
	}
	return wl, logs
}

func TestSettledLogs(t *testing.T) {
	t.Run("every process reads every log", func(t *testing.T) {
		wl, logs := fleetLayout(20, 10, 2)
		got := wl.settledLogs(logs)
		for _, p := range wl.procs {
			if !slices.Equal(got[p], logs) {
				t.Errorf("%s reads %v, want every log (%d)", p.name, got[p], len(logs))
			}
		}
	})
	t.Run("a fleet's process reads its own logs, some readers' every log", func(t *testing.T) {
		wl, logs := fleetLayout(2000, 400, 200) // 800 logs: 1.6 million reads if every process read every log
		got := wl.settledLogs(logs)
		reads, readAll := 0, 0
		for i, p := range wl.procs {
			reads += len(got[p])
			if slices.Equal(got[p], logs) {
				if i != readAll || i >= wl.cfg.Readers {
					t.Errorf("%s reads every log, but only the first processes with a reader should", p.name)
				}
				readAll++
				continue
			}
			var want []history.LogID
			for _, m := range wl.members {
				if m.proc == p {
					want = append(want, history.RoleLog(m.role), history.WorkLog(m.workP))
				}
			}
			slices.SortFunc(want, func(a, b history.LogID) int { return slices.Index(logs, a) - slices.Index(logs, b) })
			if !slices.Equal(got[p], want) {
				t.Errorf("%s reads %v, want its own logs %v", p.name, got[p], want)
			}
		}
		// Every process works on one role (2 logs): 4,000 reads; each reader's process that
		// reads every log adds 798, and as many do as fit in the budget.
		if want := 4000 + (settledBudget-4000)/798*798; reads != want || readAll != (settledBudget-4000)/798 {
			t.Errorf("%d settled reads, %d processes reading every log; want %d and %d", reads, readAll, want, (settledBudget-4000)/798)
		}
	})
	t.Run("the first reader's process reads every log even past the budget", func(t *testing.T) {
		wl, logs := fleetLayout(12000, 2000, 3) // own logs alone: 24,000 pairs
		got := wl.settledLogs(logs)
		if !slices.Equal(got[wl.procs[0]], logs) {
			t.Errorf("the first reader's process reads %d logs, want every log (%d)", len(got[wl.procs[0]]), len(logs))
		}
		if n := len(got[wl.procs[1]]); n != 2 {
			t.Errorf("the second reader's process reads %d logs, want its own 2: the budget is spent", n)
		}
	})
	t.Run("readers that share a process count it once", func(t *testing.T) {
		wl, logs := fleetLayout(2000, 400, 4000) // two readers on every process
		got := wl.settledLogs(logs)
		readAll := 0
		for _, p := range wl.procs {
			if slices.Equal(got[p], logs) {
				readAll++
			}
		}
		if want := (settledBudget - 4000) / 798; readAll != want {
			t.Errorf("%d processes read every log, want %d", readAll, want)
		}
	})
}
