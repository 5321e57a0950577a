package pipeline

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDefaultCompressorWritesItsArgument shows a franz-go v1.22.3 quirk (docs/findings.md):
// kgo.DefaultCompressor drops repeated codecs by writing into the slice it was given, and
// NewClient calls it on the slice a ProducerBatchCompression option holds. So one such option
// shared by clients built at once is a data race (the race detector caught the pipeline
// suite's shared option in CI), and a list with a repeated codec is rewritten under its owner.
// Shown here without the race detector: the caller's list changes. It fails once franz-go
// copies the list first; the suite then need not build an option per client.
func TestDefaultCompressorWritesItsArgument(t *testing.T) {
	codecs := []kgo.CompressionCodec{kgo.SnappyCompression(), kgo.SnappyCompression(), kgo.NoCompression()}
	before := codecs[1]
	if _, err := kgo.DefaultCompressor(codecs...); err != nil {
		t.Fatal(err)
	}
	if codecs[1] == before {
		t.Fatal("kgo.DefaultCompressor left its argument as it was: a ProducerBatchCompression option can be shared between clients now (update docs/findings.md)")
	}
	if codecs[1] != kgo.NoCompression() {
		t.Fatalf("the caller's second codec became %v, want the third (none) moved over the repeated snappy", codecs[1])
	}
}
