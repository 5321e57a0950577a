package local

import (
	"errors"
	"fmt"
	"github.com/fencecheck/fencecheck/cluster/internal/kraft"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultVersion is the Kafka release used when neither Options.Version nor
// FENCECHECK_KAFKA_HOME says otherwise; mk/kafka.mk fetches the same one.
const DefaultVersion = kraft.DefaultVersion

// EnvHome names the environment variable pointing at one Kafka version's
// folder (the one holding libs/); `make` exports it.
const EnvHome = "FENCECHECK_KAFKA_HOME"

// ErrKafkaMissing is matched by the error New returns when the broker jars
// are not installed; the message names the make command that installs them.
var ErrKafkaMissing = errors.New("kafka jars not installed")

// Home is an installed Kafka: a folder whose libs/ holds the broker classpath.
type Home struct {
	Dir     string // the folder; libs/ is inside
	Version string // from libs/kafka_2.13-<version>.jar
}

// Libs is the classpath folder.
func (h Home) Libs() string { return filepath.Join(h.Dir, "libs") }

// Major is the major version (3 or 4).
func (h Home) Major() int {
	m, _ := strconv.Atoi(strings.SplitN(h.Version, ".", 2)[0])
	return m
}

// CacheDir is where `make kafka` puts version v:
// $HOME/.cache/fencecheck/kafka/<v> (os.UserCacheDir honours XDG_CACHE_HOME).
func CacheDir(v string) string { return filepath.Join(userCache(), "fencecheck", "kafka", v) }

// StartCacheDir is the default Options.StartCache: $HOME/.cache/fencecheck/kafka-start.
func StartCacheDir() string { return filepath.Join(userCache(), "fencecheck", "kafka-start") }

// userCache is os.UserCacheDir, or $HOME/.cache when it has none.
func userCache() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.Getenv("HOME"), ".cache")
	}
	return base
}

// FindHome locates the jars for version ("" = any, preferring DefaultVersion):
// dir if given; else $FENCECHECK_KAFKA_HOME when it holds that version; else
// the cache folder of `make kafka`. The error when nothing is found matches
// ErrKafkaMissing and names the command to run.
func FindHome(dir, version string) (Home, error) {
	if dir != "" {
		h, err := readHome(dir)
		if err != nil {
			return Home{}, err
		}
		if version != "" && h.Version != version {
			return Home{}, fmt.Errorf("kafka home %s holds Kafka %s, not %s", dir, h.Version, version)
		}
		return h, nil
	}
	if env := os.Getenv(EnvHome); env != "" {
		h, err := readHome(env)
		if err == nil && (version == "" || h.Version == version) {
			return h, nil
		}
		if err != nil && version == "" {
			return Home{}, fmt.Errorf("%s=%s: %w", EnvHome, env, err)
		}
	}
	if version == "" {
		version = DefaultVersion
	}
	return readHome(CacheDir(version))
}

func readHome(dir string) (Home, error) {
	jars, _ := filepath.Glob(filepath.Join(dir, "libs", "kafka_2.13-*.jar"))
	for _, j := range jars {
		v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(j), "kafka_2.13-"), ".jar")
		// Skip -test, -sources and the like.
		if v != "" && !strings.ContainsAny(v, "-") {
			return Home{Dir: dir, Version: v}, nil
		}
	}
	v := filepath.Base(dir)
	if !strings.Contains(v, ".") {
		v = DefaultVersion
	}
	return Home{}, fmt.Errorf("no kafka_2.13 jar in %s: %w; run `make kafka KAFKA_VERSION=%s` (or set %s to a folder whose libs/ holds the broker jars)",
		filepath.Join(dir, "libs"), ErrKafkaMissing, v, EnvHome)
}
