package kraft

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSetProperties(t *testing.T) {
	in := "#\n#Fri Dec 04 03:59:13 UTC 2026\nnode.id=0\ndirectory.id=SS0bATKwJ6-6GwezZIbQIQ\nversion=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n"
	got, err := setProperties([]byte(in), map[string]string{"node.id": "2", "cluster.id": "C", "directory.id": "D"})
	if err != nil {
		t.Fatal(err)
	}
	want := "#\n#Fri Dec 04 03:59:13 UTC 2026\nnode.id=2\ndirectory.id=D\nversion=1\ncluster.id=C\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := setProperties([]byte("version=1\nnode.id=0\n"), map[string]string{"node.id": "1", "cluster.id": "C"}); err == nil || !strings.Contains(err.Error(), "cluster.id") {
		t.Errorf("a meta.properties without cluster.id: %v, want an error naming it", err)
	}
}

// cachedCluster is a cluster of n nodes on r with cache as its Config.Cache, its folders made,
// built without New (which needs real brokers).
func cachedCluster(t *testing.T, r *fakeRunner, cache string, n int) *Cluster {
	t.Helper()
	c := &Cluster{cfg: Config{Kind: "fake", Version: "4.1.2", Brokers: n, TxnVersion: 2, Dir: t.TempDir(), Runner: r,
		Cache: cache, JVM: "/usr/bin/java 1 2", JVMFlags: DefaultJVMFlags}, log: slog.New(slog.DiscardHandler)}
	var err error
	if c.clusterID, err = newClusterID(); err != nil {
		t.Fatal(err)
	}
	if err := c.makeDirs(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFormatEntry: the cached format is one per release, jars, pinned features and settings,
// and none for a secured cluster (its credentials are its own) or without a cache.
func TestFormatEntry(t *testing.T) {
	cache := t.TempDir()
	c := cachedCluster(t, &fakeRunner{}, cache, 1)
	tv2 := c.formatEntry([]string{"-f", "transaction.version=2"})
	if !strings.HasPrefix(tv2, filepath.Join(cache, "format")+string(filepath.Separator)) {
		t.Fatalf("entry %q is not in the cache's format folder", tv2)
	}
	if e := c.formatEntry([]string{"-f", "transaction.version=1"}); e == tv2 {
		t.Error("TV1 and TV2 share a format entry")
	}
	c.cfg.Configs = map[string]string{"num.partitions": "3"}
	if e := c.formatEntry([]string{"-f", "transaction.version=2"}); e == tv2 {
		t.Error("a setting does not change the format entry")
	}
	c.cfg.Version = "4.2.0"
	if e := c.formatEntry([]string{"-f", "transaction.version=2"}); e == tv2 {
		t.Error("another release shares the format entry")
	}
	c.sec = &material{}
	if e := c.formatEntry(nil); e != "" {
		t.Errorf("a secured cluster formats from the cache entry %q", e)
	}
	c.sec, c.cfg.Cache = nil, ""
	if e := c.formatEntry(nil); e != "" {
		t.Errorf("no cache, but the format entry %q", e)
	}
}

// TestFormatFromCache: a format saved from one cluster's node 0 formats every node of another,
// each with that cluster's id, its own node id and a directory id of its own.
func TestFormatFromCache(t *testing.T) {
	cache := t.TempDir()
	first := cachedCluster(t, &fakeRunner{}, cache, 1)
	entry := first.formatEntry(nil)
	if ok, err := first.formatFromCache(entry); err != nil || ok {
		t.Fatalf("an empty cache formatted (%v, %v)", ok, err)
	}
	d := first.nodes[0].dataDir
	meta := "#\n#a date\nnode.id=0\ndirectory.id=SS0bATKwJ6-6GwezZIbQIQ\nversion=1\ncluster.id=" + first.clusterID + "\n"
	if err := os.WriteFile(filepath.Join(d, "meta.properties"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "bootstrap.checkpoint"), []byte("features"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := first.saveFormat(entry); err != nil {
		t.Fatal(err)
	}
	if err := first.saveFormat(entry); err != nil {
		t.Fatalf("saving an entry another cluster saved: %v", err)
	}

	second := cachedCluster(t, &fakeRunner{}, cache, 3)
	if ok, err := second.formatFromCache(entry); err != nil || !ok {
		t.Fatalf("formatFromCache = %v, %v; want a format from the cache", ok, err)
	}
	dirIDs := map[string]bool{}
	for _, n := range second.nodes {
		if b, err := os.ReadFile(filepath.Join(n.dataDir, "bootstrap.checkpoint")); err != nil || string(b) != "features" {
			t.Errorf("%s: bootstrap.checkpoint %q (%v), want the cached one", n.dir, b, err)
		}
		b, err := os.ReadFile(filepath.Join(n.dataDir, "meta.properties"))
		if err != nil {
			t.Fatal(err)
		}
		props := map[string]string{}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				props[k] = v
			}
		}
		if props["cluster.id"] != second.clusterID || props["node.id"] != strings.TrimPrefix(filepath.Base(n.dir), "b") || props["version"] != "1" {
			t.Errorf("%s: meta.properties %v, want cluster.id %s and its node id", n.dir, props, second.clusterID)
		}
		dirIDs[props["directory.id"]] = true
	}
	if len(dirIDs) != 3 || dirIDs["SS0bATKwJ6-6GwezZIbQIQ"] {
		t.Errorf("directory ids %v: want three new ones", dirIDs)
	}
}

// TestClassArchiveTraining: without an archive, node 0's broker JVM (and only it) dumps one
// at exit; Close stops that JVM (SIGTERM) and puts the archive in place; the next cluster's
// brokers all map it.
func TestClassArchiveTraining(t *testing.T) {
	cache := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := &fakeRunner{}
	c := cachedCluster(t, r, cache, 2)
	c.archiveFlags()
	if c.archiveState != "training" {
		t.Fatalf("archive state %q with an empty cache, want training", c.archiveState)
	}
	for _, n := range c.nodes {
		if err := c.start(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	dumps := func(args []string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-XX:ArchiveClassesAtExit=") })
	}
	if !dumps(r.args[0]) || dumps(r.args[1]) {
		t.Fatalf("broker args %q: want only node 0's JVM to dump the archive", r.args)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.archive); err != nil {
		t.Fatalf("no archive after Close: %v", err)
	}
	if left, _ := filepath.Glob(c.archive + ".tmp-*"); len(left) != 0 {
		t.Errorf("training files left: %v", left)
	}

	r2 := &fakeRunner{}
	next := cachedCluster(t, r2, cache, 2)
	next.archiveFlags()
	if next.archiveState != "used" || next.archive != c.archive {
		t.Fatalf("the next cluster: archive %q state %q, want %s used", next.archive, next.archiveState, c.archive)
	}
	for _, n := range next.nodes {
		if err := next.start(ctx, n); err != nil {
			t.Fatal(err)
		}
		if a := r2.args[len(r2.args)-1]; !slices.Contains(a, "-XX:SharedArchiveFile="+c.archive) || dumps(a) {
			t.Errorf("%s's args %q: want the archive mapped, no dump", n.dir, a)
		}
	}
	if err := next.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Another JVM, or flags of the caller's own about CDS, get no archive of this one.
	other := cachedCluster(t, &fakeRunner{}, cache, 1)
	other.cfg.JVM = "/opt/jdk-25/bin/java 3 4"
	if other.archiveFlags(); other.archive == c.archive {
		t.Error("another JVM maps this JVM's archive")
	}
	own := cachedCluster(t, &fakeRunner{}, cache, 1)
	own.cfg.JVMFlags = append(slices.Clone(DefaultJVMFlags), "-Xshare:off")
	if own.archiveFlags(); own.archiveState != "" {
		t.Errorf("with -Xshare:off in the flags the archive state is %q, want none", own.archiveState)
	}
}
