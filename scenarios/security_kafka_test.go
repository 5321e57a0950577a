//go:build kafka

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

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// TestSecuredRunLeaksNoSecret runs holder-partition (links cut under TLS) on a SASL_SSL
// cluster, attached as an external cluster whose credentials come from FENCECHECK_*
// variables naming files, and then greps every file of the run directory for the password
// and for the key material of the brokers and the client. TestScenariosContainers does the
// same on a SASL_SSL containers cluster that fencecheck runs itself.
func TestSecuredRunLeaksNoSecret(t *testing.T) {
	testenv.NeedKafka(t, "starts a Kafka cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lc, err := local.New(ctx, local.Options{Brokers: 1, Security: scenarios.SecuritySASLSSL, LogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close(context.Background()) })
	ca, _, _, pwFile := lc.SecurityFiles()
	t.Setenv(harness.EnvSASLUsername, lc.ClientSecurity().Username)
	t.Setenv(harness.EnvSASLPasswordFile, pwFile)
	t.Setenv(harness.EnvTLSCAFile, ca)
	secrets := clusterSecrets(t, lc)

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
	start := func() (*harness.Outcome, error) {
		return harness.Run(context.Background(), s, harness.Options{Root: root, Seed: 17})
	}
	out, err := start()
	out = mustBeValid(t, "holder-partition", "a SASL_SSL "+scenarios.KindExternal, 17, out, err, start)
	mustLeakNoSecret(t, root, out, secrets, scenarios.SecuritySASLSSL)
}

// securedCluster is a local or containers cluster with a secured client listener: both
// generate their certificates and credentials in the cluster folder at start.
type securedCluster interface {
	ClientSecurity() *cluster.Security
	SecurityFiles() (ca, cert, key, passwordFile string)
}

// clusterSecrets returns what no file of a run on cl may hold, by what it is: the
// administrator's SCRAM password, and the first line of base64 of every private key
// fencecheck generated for cl (the brokers' and the client's). Call it while cl runs: Close
// removes the cluster folder that holds the keys.
func clusterSecrets(t *testing.T, cl cluster.Cluster) map[string][]byte {
	t.Helper()
	sc, ok := cl.(securedCluster)
	if !ok || sc.ClientSecurity() == nil {
		t.Fatalf("the %s cluster has no secured listener", cl.Info().Kind)
	}
	_, _, _, pwFile := sc.SecurityFiles()
	if pwFile == "" {
		t.Fatalf("the %s cluster has no SASL password file (security %s)", cl.Info().Kind, sc.ClientSecurity())
	}
	secrets := map[string][]byte{"password": []byte(sc.ClientSecurity().Password)}
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
	return secrets
}

// mustLeakNoSecret greps every file under root (the run directories, and whatever else the
// test put there, such as broker logs) for each of secrets and for any PEM private key, and
// checks that the run.json of out records the security mode.
func mustLeakNoSecret(t *testing.T, root string, out *harness.Outcome, secrets map[string][]byte, mode string) {
	t.Helper()
	files, leaks := 0, 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
				leaks++
			}
		}
		if bytes.Contains(data, []byte("PRIVATE KEY")) {
			t.Errorf("%s holds a private key", path)
			leaks++
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
	if !bytes.Contains(runJSON, []byte(`"security"`)) || !bytes.Contains(runJSON, []byte(`"`+mode+`"`)) {
		t.Errorf("run.json does not record the security mode %s:\n%s", mode, runJSON)
	}
	if files == 0 {
		t.Fatalf("no file under %s to check", root)
	}
	t.Logf("%d files under %s checked; %d secrets found", files, root, leaks)
}

// TestUnauthorizedMemberNeverHolds runs steady on a SASL cluster where process p2
// authenticates as a principal the ACLs deny every transactional id: its members (one per
// role) never hold their role, every acquire of theirs fails, and the other members still
// hand the roles over among themselves; the run is valid.
func TestUnauthorizedMemberNeverHolds(t *testing.T) {
	testenv.NeedKafka(t, "starts a Kafka cluster")
	t.Parallel() // beside TestScenariosContainers: see there
	s, _, err := scenarios.Builtin("steady")
	if err != nil {
		t.Fatal(err)
	}
	s.UseCluster(scenarios.KindLocal)
	s.Cluster.Brokers = 1
	s.Cluster.Security = scenarios.SecuritySASLScram
	s.Cluster.UnauthorizedProcesses = []int{2}
	s.Workload.Processes, s.Workload.Roles, s.Workload.MembersPerRole = 4, 2, 3
	s.Duration = scenarios.Duration(15 * time.Second)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	start := func() (*harness.Outcome, error) {
		return harness.Run(context.Background(), s, harness.Options{Root: t.TempDir(), Seed: 23})
	}
	out, err := start()
	out = mustBeValid(t, "steady with an unauthorized process", "a SASL "+scenarios.KindLocal, 23, out, err, start)
	h, err := history.ReadFile(out.Dir.History())
	if err != nil {
		t.Fatal(err)
	}
	denied := map[string]bool{} // role/member of p2's members
	okAcquires := map[string]int{}
	var deniedAcquires int
	for _, op := range h.All() {
		if op.Kind != history.KindAcquire {
			continue
		}
		if op.Process == "p2" {
			denied[op.Role+"/"+op.Member] = true
			deniedAcquires++
			if op.Type != history.TypeFail {
				t.Errorf("acquire by %s/%s on p2: %v %q; want fail", op.Role, op.Member, op.Type, op.Error)
			}
			continue
		}
		if op.Type == history.TypeOK {
			okAcquires[op.Role]++
		}
	}
	if deniedAcquires == 0 {
		t.Fatal("the members on p2 never tried to acquire")
	}
	for _, role := range []string{"r1", "r2"} {
		if okAcquires[role] < 2 {
			t.Errorf("role %s: %d acquires by authorized members; want handoffs among them", role, okAcquires[role])
		}
	}
	for _, op := range h.All() {
		if op.Kind == history.KindFinalRead && op.Type == history.TypeOK {
			for _, rec := range op.Result.Records {
				role := op.Role
				if rec.Role != "" {
					role = rec.Role // a work record names its writer's role
				}
				if rec.Kind != history.RecordRegistration && denied[role+"/"+rec.Member] {
					t.Errorf("final read of %s holds a record of unauthorized member %s: %+v", op.Role, rec.Member, rec)
				}
			}
		}
	}
	t.Logf("%d acquires by p2's members %v, all fail; authorized acquires %v", deniedAcquires, denied, okAcquires)
}
