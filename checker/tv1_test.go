package checker_test

import (
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// TestTV1AbortBumpRealHistories checks three recorded runs on transaction-version-1 clusters
// (Apache Kafka 3.9.1, and 4.1.2 formatted with TV1, one with the transaction coordinator
// killed) in which acquires aborted the previous holder's open transaction: the holder was
// fenced before a describe reported the abort epoch, which no acquire returned. Read as TV1,
// every check is valid. Read as TV2 or an unknown version, where an acquire mints one epoch,
// the same fences are spurious-fence anomalies (advisory) and every guarantee is still valid.
func TestTV1AbortBumpRealHistories(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "tv1", "*.jsonl.gz"))
	if err != nil || len(paths) != 3 {
		t.Fatalf("want the 3 recorded TV1 histories, found %d: %v", len(paths), err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := readGzipHistory(t, path)
			if h.Meta.TransactionVersion != 1 {
				t.Fatalf("header transaction_version %d, want 1", h.Meta.TransactionVersion)
			}
			for _, tv := range []int{1, 2, 0} {
				h.Meta.TransactionVersion = tv
				res, err := checker.Check(context.Background(), h, checker.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Verdict != checker.VerdictValid {
					t.Errorf("as TV%d: run is %s, want valid: %q", tv, res.Verdict, res.NotValid())
				}
				for _, c := range res.Checks {
					want := checker.VerdictValid
					switch {
					case c.Name == checker.SpuriousFence && tv != 1:
						want = checker.VerdictInvalid
					case c.Name == checker.NoTornTxn:
						want = checker.VerdictNotCovered // recorded before writes of several records
					}
					if c.Verdict != want {
						t.Errorf("as TV%d: %s is %s, want %s: %s", tv, c.Name, c.Verdict, want, describe(c))
					}
				}
			}
		})
	}
}

func readGzipHistory(t *testing.T, path string) *history.History {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h
}
