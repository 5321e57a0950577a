package harness

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Environment variables that carry an external cluster's credentials. A secret is read from
// a variable or a file the variable names, never from a flag or a scenario file, so that it
// stays out of run.json, the repeat command and shell history.
const (
	EnvSASLUsername     = "FENCECHECK_SASL_USERNAME"
	EnvSASLPassword     = "FENCECHECK_SASL_PASSWORD"
	EnvSASLPasswordFile = "FENCECHECK_SASL_PASSWORD_FILE"
	EnvSASLMechanism    = "FENCECHECK_SASL_MECHANISM" // SCRAM-SHA-256 or SCRAM-SHA-512 (default)
	EnvTLSCAFile        = "FENCECHECK_TLS_CA_FILE"    // PEM; default: the system's roots
	EnvTLSCertFile      = "FENCECHECK_TLS_CERT_FILE"  // PEM client certificate (mutual TLS)
	EnvTLSKeyFile       = "FENCECHECK_TLS_KEY_FILE"   // its PEM private key
)

// externalSecurity builds an external cluster's client security for mode from the
// environment (see EnvSASLUsername and the others). Errors name the variable, never a value.
func externalSecurity(mode string) (*cluster.Security, error) {
	if mode == "" {
		return nil, nil
	}
	sec := &cluster.Security{}
	if mode == scenarios.SecurityTLS || mode == scenarios.SecuritySASLSSL {
		conf := &tls.Config{MinVersion: tls.VersionTLS12}
		if f := os.Getenv(EnvTLSCAFile); f != "" {
			pem, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvTLSCAFile, err)
			}
			conf.RootCAs = x509.NewCertPool()
			if !conf.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s: %s holds no PEM certificate", EnvTLSCAFile, f)
			}
		}
		cert, key := os.Getenv(EnvTLSCertFile), os.Getenv(EnvTLSKeyFile)
		switch {
		case cert != "" && key != "":
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				// crypto/tls names the files and what is wrong with them, not the key.
				return nil, fmt.Errorf("%s, %s: %w", EnvTLSCertFile, EnvTLSKeyFile, err)
			}
			conf.Certificates = []tls.Certificate{pair}
		case cert != "" || key != "":
			return nil, fmt.Errorf("%s and %s: give both or neither", EnvTLSCertFile, EnvTLSKeyFile)
		case mode == scenarios.SecurityTLS:
			return nil, fmt.Errorf("cluster.security tls is mutual TLS: set %s and %s (or use sasl-ssl)", EnvTLSCertFile, EnvTLSKeyFile)
		}
		sec.TLS = conf
	}
	if mode == scenarios.SecuritySASLScram || mode == scenarios.SecuritySASLSSL {
		sec.SASLMechanism = cluster.SASLScramSHA512
		if m := os.Getenv(EnvSASLMechanism); m != "" {
			if m != cluster.SASLScramSHA256 && m != cluster.SASLScramSHA512 {
				return nil, fmt.Errorf("%s: %q, want %s or %s", EnvSASLMechanism, m, cluster.SASLScramSHA256, cluster.SASLScramSHA512)
			}
			sec.SASLMechanism = m
		}
		if sec.Username = os.Getenv(EnvSASLUsername); sec.Username == "" {
			return nil, fmt.Errorf("cluster.security %s: set %s", mode, EnvSASLUsername)
		}
		pw, pwFile := os.Getenv(EnvSASLPassword), os.Getenv(EnvSASLPasswordFile)
		switch {
		case pw != "" && pwFile != "":
			return nil, fmt.Errorf("set %s or %s, not both", EnvSASLPassword, EnvSASLPasswordFile)
		case pwFile != "":
			b, err := os.ReadFile(pwFile)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvSASLPasswordFile, err)
			}
			pw = strings.TrimRight(string(b), "\r\n")
		}
		if pw == "" {
			return nil, fmt.Errorf("cluster.security %s: set %s or %s", mode, EnvSASLPassword, EnvSASLPasswordFile)
		}
		sec.Password = pw
	}
	return sec, nil
}

// ConnectionHelp says how a client outside fencecheck connects to cl, without a secret: the
// protocol, and the files that hold the CA, the client certificate and key, and the
// password. Nil for a plaintext cluster.
func ConnectionHelp(cl cluster.Cluster) []string {
	sec := cluster.ClientSecurity(cl)
	if sec == nil {
		return nil
	}
	lines := []string{"security: " + sec.String()}
	f, ok := cl.(interface {
		SecurityFiles() (ca, cert, key, passwordFile string)
	})
	if !ok {
		return lines
	}
	ca, cert, key, pw := f.SecurityFiles()
	if ca != "" {
		lines = append(lines, "  CA certificate (ssl.truststore.type=PEM): "+ca)
	}
	if cert != "" {
		lines = append(lines, "  client certificate: "+cert, "  client key: "+key)
	}
	if pw != "" {
		lines = append(lines, fmt.Sprintf("  SASL user %s, password in %s (mode 0600), e.g. %s=%s", sec.Username, pw, EnvSASLPasswordFile, pw))
	}
	return lines
}

// UnauthorizedUser is the principal of the processes in cluster.unauthorized_processes: it
// may use every topic, and the ACLs deny it every transactional id.
const UnauthorizedUser = "fencecheck-unauthorized"

// unauthorizedPrincipal creates UnauthorizedUser on a secured cluster with SASL (a random
// SCRAM-SHA-512 password, kept in memory only), allows it every operation on every topic and
// denies it every transactional id, and returns once a broker authenticates it and answers
// as its ACLs say.
func unauthorizedPrincipal(ctx context.Context, cl cluster.Cluster, log *slog.Logger) (*cluster.Security, error) {
	admin := cluster.ClientSecurity(cl)
	if admin == nil || admin.SASLMechanism == "" {
		return nil, fmt.Errorf("cluster.unauthorized_processes: needs cluster.security %s or %s", scenarios.SecuritySASLScram, scenarios.SecuritySASLSSL)
	}
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	sec := &cluster.Security{TLS: admin.TLS, SASLMechanism: cluster.SASLScramSHA512, Username: UnauthorizedUser, Password: hex.EncodeToString(b[:])}
	acl, err := cluster.AdminClient(cl, log)
	if err != nil {
		return nil, err
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	up, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: sec.Username, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: sec.Password}})
	if err == nil {
		for _, r := range up {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", sec.Username, err)
	}
	principal := "User:" + sec.Username
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow(principal).AllowHosts().Topics("*").Operations(kadm.OpAll),
		kadm.NewACLs().Deny(principal).DenyHosts().TransactionalIDs("*").Operations(kadm.OpAll),
	} {
		res, err := adm.CreateACLs(ctx, b.ResourcePatternType(kadm.ACLPatternLiteral))
		if err == nil {
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("ACLs of %s: %w", sec.Username, err)
		}
	}
	// Credentials and ACLs reach the brokers through the metadata log. Ready: a broker
	// authenticates the user and tells it that an absent topic is unknown (not unauthorized).
	probe, err := cluster.NewAdminClient(cl.Bootstrap(), log, sec.KgoOpts()...) // not AdminClient: its SASL would come first
	if err != nil {
		return nil, err
	}
	defer probe.Close()
	const topic = "fencecheck-acl-probe"
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		req := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, probe)
		if err == nil && len(resp.Topics) == 1 {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				log.Info("unauthorized principal ready", "user", sec.Username)
				return sec, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("user %s not ready: %v (%w)", sec.Username, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
