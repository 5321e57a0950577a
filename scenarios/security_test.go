package scenarios_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/scenarios"
)

// TestSecuredRunLeaksNoSecret runs holder-partition (links cut under TLS) on a SASL_SSL
// cluster, attached as an external cluster whose credentials come from FENCECHECK_*
// variables naming files, and then greps every file of the run directory for the password
// and for the key material of the brokers and the client.
func TestSecuredRunLeaksNoSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Kafka cluster")
	}
	if _, err := local.FindHome("", ""); err != nil {
		if os.Getenv("FENCECHECK_REQUIRE_KAFKA") == "1" {
			t.Fatalf("FENCECHECK_REQUIRE_KAFKA=1 and the Kafka jars are missing: %v", err)
		}
		t.Skipf("local Kafka not installed (%v); run make kafka", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lc, err := local.New(ctx, local.Options{Brokers: 1, Security: scenarios.SecuritySASLSSL, LogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close(context.Background()) })
	ca, _, _, pwFile := lc.SecurityFiles()
	t.Setenv(scenarios.EnvSASLUsername, lc.ClientSecurity().Username)
	t.Setenv(scenarios.EnvSASLPasswordFile, pwFile)
	t.Setenv(scenarios.EnvTLSCAFile, ca)

	// The secrets to look for: the password, and the body of every private key fencecheck
	// generated for the cluster.
	secrets := map[string][]byte{"password": []byte(lc.ClientSecurity().Password)}
	keys, _ := filepath.Glob(filepath.Join(filepath.Dir(pwFile), "*.pem"))
	for _, f := range keys {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for rest := data; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if strings.Contains(b.Type, "PRIVATE KEY") {
				body := pem.EncodeToMemory(b)
				lines := bytes.Split(body, []byte("\n"))
				secrets["private key of "+filepath.Base(f)] = lines[1] // its first line of base64
			}
		}
	}
	if len(secrets) < 3 {
		t.Fatalf("found %d secrets to look for (the password and two keys expected)", len(secrets))
	}

	s, _, err := scenarios.Builtin("holder-partition")
	if err != nil {
		t.Fatal(err)
	}
	s.UseCluster(scenarios.KindExternal)
	s.Cluster.Bootstrap = strings.Join(lc.Bootstrap(), ",")
	s.Cluster.Security = scenarios.SecuritySASLSSL
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	out, err := scenarios.Run(context.Background(), s, scenarios.Options{Root: root, Seed: 17})
	if err != nil {
		t.Fatal(err)
	}
	requireValid(t, "holder-partition", out)

	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for what, secret := range secrets {
			if bytes.Contains(data, secret) {
				t.Errorf("%s holds the %s", path, what)
			}
		}
		if bytes.Contains(data, []byte("PRIVATE KEY")) {
			t.Errorf("%s holds a private key", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runJSON, err := os.ReadFile(out.Dir.RunJSON())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(runJSON, []byte(`"security"`)) || !bytes.Contains(runJSON, []byte(`"sasl-ssl"`)) {
		t.Errorf("run.json does not record the security mode:\n%s", runJSON)
	}
	t.Logf("%d files of the run checked; none holds a secret", files)
}
