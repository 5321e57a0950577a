package kraft

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/cluster/links"
)

// What a cluster keeps between starts in Config.Cache: the storage tool's output, and the
// broker JVM's class-data archive (CDS). Starting three broker JVMs on 2 cores is mostly class
// loading, and formatting is three more JVMs before them; with both cached a start runs only
// the brokers, each mapping the classes an earlier broker loaded. Both only save time: a
// start without them formats with the tool and starts the JVMs without an archive, and a JVM
// ignores an archive that does not match it (-Xshare:auto, the default).

// trainingStop bounds how long Close waits for the JVM writing the class-data archive to
// shut down and write it, before it kills the JVM as it does the others.
const trainingStop = 30 * time.Second

// cacheKey is a short hash of parts, naming a cache entry.
func cacheKey(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:12])
}

// formatEntry is the cache folder of this cluster's format output, "" when it must not come
// from the cache: no cache, or a secured cluster (its SCRAM credentials are its own). The
// tool's output depends on the release and its jars, the features pinned and the settings,
// not on the node or the cluster id, which formatFromCache writes per node.
func (c *Cluster) formatEntry(toolArgs []string) string {
	if c.cfg.Cache == "" || c.sec != nil {
		return ""
	}
	parts := []string{"format", c.cfg.Version, c.cfg.Runner.Classpath(), strings.Join(toolArgs, " ")}
	for _, k := range slices.Sorted(maps.Keys(c.cfg.Configs)) {
		parts = append(parts, k+"="+c.cfg.Configs[k])
	}
	return filepath.Join(c.cfg.Cache, "format", cacheKey(parts...))
}

// metaKeys are the meta.properties fields that belong to one node of one cluster.
var metaKeys = []string{"cluster.id", "node.id", "directory.id"}

// formatFromCache formats every node from entry: the files the tool wrote into a data folder,
// with meta.properties's cluster id, node id and directory id set for each node. It reports
// false, having written nothing, when entry holds no format.
func (c *Cluster) formatFromCache(entry string) (bool, error) {
	meta, err := os.ReadFile(filepath.Join(entry, "meta.properties"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, n := range c.nodes {
		dirID, err := newClusterID() // a directory id is a Uuid too
		if err != nil {
			return false, err
		}
		if err := os.CopyFS(n.dataDir, os.DirFS(entry)); err != nil {
			return false, fmt.Errorf("format %s from the cache %s: %w", links.BrokerName(n.id), entry, err)
		}
		props, err := setProperties(meta, map[string]string{
			"cluster.id": c.clusterID, "node.id": strconv.Itoa(int(n.id)), "directory.id": dirID,
		})
		if err != nil {
			return false, fmt.Errorf("cached format %s: %w", entry, err)
		}
		if err := os.WriteFile(filepath.Join(n.dataDir, "meta.properties"), props, 0o644); err != nil {
			return false, err
		}
	}
	return true, nil
}

// saveFormat stores node 0's freshly formatted data folder as entry. Another cluster saving
// the same entry at the same time is harmless: one rename wins, and both are the same format.
func (c *Cluster) saveFormat(entry string) error {
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(entry), ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // left only when the rename failed
	if err := os.CopyFS(tmp, os.DirFS(c.nodes[0].dataDir)); err != nil {
		return err
	}
	if err := os.Rename(tmp, entry); err != nil {
		if _, serr := os.Stat(entry); serr == nil {
			return nil // another cluster saved it first
		}
		return err
	}
	return nil
}

// setProperties returns the properties file text with each key of set given its value. Every
// key of set must be there: a format whose meta.properties lacks one is not a format this
// code knows how to copy.
func setProperties(text []byte, set map[string]string) ([]byte, error) {
	var out bytes.Buffer
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if k, _, ok := strings.Cut(line, "="); ok {
			if v, ok := set[strings.TrimSpace(k)]; ok {
				line = strings.TrimSpace(k) + "=" + v
				seen[strings.TrimSpace(k)] = true
			}
		}
		out.WriteString(line + "\n")
	}
	for k := range set {
		if !seen[k] {
			return nil, fmt.Errorf("meta.properties has no %s", k)
		}
	}
	return out.Bytes(), sc.Err()
}

// archiveFlags decides how this cluster's brokers use the class-data archive, once, in New:
// the flag that maps it into every broker JVM when the cache holds one for this JVM, these
// jars and these flags; otherwise, node 0's JVM (each start of it) dumps the classes it loaded
// at exit (-XX:ArchiveClassesAtExit) to a file of this cluster's that Close, which stops that
// JVM with SIGTERM so that it exits and dumps, renames into place. Flags that set CDS options
// themselves turn this off.
func (c *Cluster) archiveFlags() {
	if c.cfg.Cache == "" || slices.ContainsFunc(c.cfg.JVMFlags, func(f string) bool {
		return strings.Contains(f, "Xshare") || strings.Contains(f, "SharedArchiveFile") || strings.Contains(f, "ArchiveClassesAtExit")
	}) {
		return
	}
	c.archive = filepath.Join(c.cfg.Cache, "cds", cacheKey("cds", c.cfg.JVM, c.cfg.Runner.Classpath(), strings.Join(c.cfg.JVMFlags, " "))+".jsa")
	if _, err := os.Stat(c.archive); err == nil {
		c.archiveState = "used"
		return
	}
	if err := os.MkdirAll(filepath.Dir(c.archive), 0o755); err != nil {
		c.log.Warn("class-data archive folder", "err", err)
		return
	}
	c.archiveState = "training"
	c.training = fmt.Sprintf("%s.tmp-%s", c.archive, c.clusterID)
}

// brokerFlags are the JVM flags of node n's broker: the configured ones and the archive's.
func (c *Cluster) brokerFlags(n *node) []string {
	flags := slices.Clone(c.cfg.JVMFlags)
	switch {
	case c.archiveState == "used":
		flags = append(flags, "-XX:SharedArchiveFile="+c.archive)
	case c.training != "" && n.id == 0:
		flags = append(flags, "-XX:ArchiveClassesAtExit="+c.training)
	}
	return flags
}

// stopTraining stops node 0's JVM with SIGTERM when it is dumping the class-data archive, waits
// for it to exit (at most trainingStop), and renames the archive into place. It runs in Close
// before the other brokers are killed: a broker shutting down cleanly talks to the controller
// quorum, which needs them. Whatever goes wrong, the archive is left unmade; the next cluster
// tries again.
func (c *Cluster) stopTraining(ctx context.Context) {
	if c.training == "" {
		return
	}
	defer os.Remove(c.training) // left only when the rename did not happen
	c.mu.Lock()
	n := c.nodes[0]
	alive, p, exited := aliveLocked(n), n.proc, n.exited
	c.mu.Unlock()
	if !alive {
		return // killed (a fault, or its start failed): it dumped nothing
	}
	if err := p.Stop(); err != nil {
		c.log.Warn("stop the broker writing the class-data archive", "broker", n.id, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, trainingStop)
	defer cancel()
	select {
	case <-exited:
	case <-ctx.Done():
		c.log.Warn("the broker writing the class-data archive did not exit; killing it", "broker", n.id, "waited", trainingStop)
		return
	}
	if st, err := os.Stat(c.training); err != nil || st.Size() == 0 {
		c.log.Warn("no class-data archive after the broker's exit", "broker", n.id, "file", c.training, "err", err)
		return
	}
	if err := os.Rename(c.training, c.archive); err != nil {
		c.log.Warn("class-data archive", "err", err)
		return
	}
	c.log.Info("class-data archive written for the next clusters", "file", c.archive)
}
