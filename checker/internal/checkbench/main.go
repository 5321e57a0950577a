// Command checkbench generates synthetic histories and checks history files, printing how long
// each phase took, so the checker's time and memory can be measured outside `go test` (for
// example under /usr/bin/time -v, which reports the peak RSS of this process alone):
//
//	go run ./checker/internal/checkbench gen -ops 1000000 -violation none -out /tmp/h.jsonl
//	go build -o /tmp/checkbench ./checker/internal/checkbench
//	/usr/bin/time -v /tmp/checkbench check /tmp/h.jsonl
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	case "floor":
		err = floor(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: checkbench gen [-ops N] [-violation none|stale-write|out-of-order|lost-write] [-seed S] -out FILE\n       checkbench check [-cpuprofile FILE] [-memprofile FILE] [-rounds N] FILE\n       checkbench floor FILE")
	os.Exit(254)
}

// Config is the benchmarks' synthetic history (see bench_test.go): ops/1000 roles of 5
// members, 1,000 operations a role, 2% unknown outcomes.
func config(ops int) checkertest.Config {
	return checkertest.Config{
		Roles: max(1, ops/1000), MembersPerRole: 5, Processes: 10, OpsPerRole: 1000, WorkPartitions: 16,
		TV: 2, Lease: 5_000_000, Indeterminate: 0.02, Slow: 0.005, ReadRate: 0.01, AcquireRate: 0.05, CandidatePause: 10_000_000,
		Faults: 10, Pauses: 10,
	}
}

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	ops := fs.Int("ops", 1_000_000, "operations")
	violation := fs.String("violation", "none", "violation to plant")
	seed := fs.Uint64("seed", 1, "seed")
	out := fs.String("out", "", "history file to write")
	_ = fs.Parse(args)
	if *out == "" {
		usage()
	}
	rng := rand.New(rand.NewPCG(*seed, 7))
	h := checkertest.Generate(config(*ops), rng)
	if *violation != "none" {
		found := false
		for _, v := range checkertest.Violations {
			if v.String() == *violation {
				found = true
				if !checkertest.Plant(h, v, rng) {
					return fmt.Errorf("no room for %s", v)
				}
			}
		}
		if !found {
			return fmt.Errorf("unknown violation %q", *violation)
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := history.Encode(f, h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of reading and checking")
	memProfile := fs.String("memprofile", "", "write an allocation profile of reading and checking")
	rounds := fs.Int("rounds", 0, "read and check the file this many times more, printing each round's wall and CPU time")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	if *rounds > 0 {
		return repeat(fs.Arg(0), *rounds)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	start := time.Now()
	h, err := history.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	read := time.Since(start)
	res, err := checker.Check(context.Background(), h, checker.Options{})
	if err != nil {
		return err
	}
	if *memProfile != "" {
		runtime.GC() // so that the profile's in-use figures are what the check still holds
		f, err := os.Create(*memProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t := res.Timings
	fmt.Printf("ops %d records %d roles %d: read %v, check %v (index %v, linear %v, porcupine %v, explain %v), verdict %s, heap in use %d MiB, total alloc %d MiB\n",
		h.Len(), res.History.Records, res.History.Roles, read.Round(time.Millisecond),
		time.Duration(t.Total).Round(time.Millisecond), time.Duration(t.Index).Round(time.Millisecond),
		time.Duration(t.Linear).Round(time.Millisecond), time.Duration(t.Porcupine).Round(time.Millisecond),
		time.Duration(t.Explain).Round(time.Millisecond), res.Verdict, ms.HeapInuse>>20, ms.TotalAlloc>>20)
	kinds := map[history.Kind]int{}
	info := 0
	for i := range h.Len() {
		kinds[h.Op(i).Kind]++
		if h.Op(i).Type == history.TypeInfo {
			info++
		}
	}
	fmt.Printf("  mix: %v; %d info (%.1f%%)\n", kinds, info, 100*float64(info)/float64(h.Len()))
	if res.Verdict == checker.VerdictInvalid {
		for _, c := range res.Checks {
			if c.Verdict == checker.VerdictInvalid && len(c.Anomalies) > 0 {
				fmt.Printf("  %s: %s\n", c.Name, c.Anomalies[0].Explanation)
			}
		}
	}
	return nil
}

// repeat reads and checks path rounds times after a first, untimed round, printing each
// round's wall time and the process's CPU time (user and system, every thread's) for the read
// and the check. On a machine shared with other work the CPU time varies much less than the
// wall time, which waits for the cores; the garbage collector's work lands in the phase that
// triggered it, as it does in `fencecheck check`.
func repeat(path string, rounds int) error {
	once := func() (read, check, readCPU, checkCPU time.Duration, verdict checker.Verdict, err error) {
		c0, t0 := cpuTime(), time.Now()
		h, err := history.ReadFile(path)
		if err != nil {
			return
		}
		c1, t1 := cpuTime(), time.Now()
		res, err := checker.Check(context.Background(), h, checker.Options{})
		if err != nil {
			return
		}
		c2, t2 := cpuTime(), time.Now()
		return t1.Sub(t0), t2.Sub(t1), c1 - c0, c2 - c1, res.Verdict, nil
	}
	if _, _, _, _, _, err := once(); err != nil {
		return err
	}
	for r := range rounds {
		read, check, readCPU, checkCPU, verdict, err := once()
		if err != nil {
			return err
		}
		fmt.Printf("round %d: read %v (cpu %v), check %v (cpu %v), verdict %s\n", r+1,
			read.Round(time.Millisecond), readCPU.Round(time.Millisecond),
			check.Round(time.Millisecond), checkCPU.Round(time.Millisecond), verdict)
	}
	return nil
}

// cpuTime returns the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// floor prints what passes over the file that decode nothing cost, as anchors for the
// reader's figure: reading it whole, finding its lines, and checking each line's JSON syntax
// with encoding/json (json.Valid) and decoding each into a generic value (json.Unmarshal
// into an any), one goroutine each, with each pass's wall and CPU time.
func floor(args []string) error {
	if len(args) != 1 {
		usage()
	}
	timed := func(name string, f func() error) error {
		c0, t0 := cpuTime(), time.Now()
		if err := f(); err != nil {
			return err
		}
		fmt.Printf("%s: %v (cpu %v)\n", name, time.Since(t0).Round(time.Millisecond), (cpuTime() - c0).Round(time.Millisecond))
		return nil
	}
	var data []byte
	if err := timed("read the file", func() (err error) { data, err = os.ReadFile(args[0]); return err }); err != nil {
		return err
	}
	lines := 0
	_ = timed("find the lines", func() error { lines = bytes.Count(data, []byte{'\n'}); return nil })
	each := func(f func(line []byte) error) error {
		for rest := data; len(rest) > 0; {
			line, after, _ := bytes.Cut(rest, []byte{'\n'})
			if err := f(line); err != nil {
				return err
			}
			rest = after
		}
		return nil
	}
	if err := timed("json.Valid, every line", func() error {
		return each(func(line []byte) error {
			if !json.Valid(line) {
				return fmt.Errorf("not JSON: %.80s", line)
			}
			return nil
		})
	}); err != nil {
		return err
	}
	if err := timed("json.Unmarshal into any, every line", func() error {
		return each(func(line []byte) error {
			var v any
			return json.Unmarshal(line, &v)
		})
	}); err != nil {
		return err
	}
	fmt.Printf("%d lines, %d MB\n", lines, len(data)>>20)
	return nil
}
