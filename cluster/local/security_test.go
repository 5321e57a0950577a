//go:build kafka

package local_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/transporttest"
)

// securedCluster starts a one-broker cluster whose client listener speaks mode.
func securedCluster(t *testing.T, mode string) *local.Cluster {
	t.Helper()
	needKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := local.New(ctx, local.Options{Brokers: 1, Security: mode, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("start a %s cluster: %v", mode, err)
	}
	t.Logf("%s cluster ready in %v", mode, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// asTransport turns the cluster's client security into the transport's.
func asTransport(s *cluster.Security) *transport.ClientSecurity {
	if s == nil {
		return nil
	}
	return &transport.ClientSecurity{TLS: s.TLS, SASLMechanism: s.SASLMechanism, Username: s.Username, Password: s.Password}
}

// startErr starts a transport on c's bootstrap addresses with sec and returns Start's error,
// which must be ErrAdmin, classified Fail, name want and not contain secret.
func startErr(t *testing.T, c *local.Cluster, sec *transport.ClientSecurity, want, secret string) {
	t.Helper()
	cfg := transport.NewConfig(strings.Join(c.Bootstrap(), ","), 10*time.Second)
	cfg.RequestTimeout = 5 * time.Second
	cfg.Security = sec
	began := time.Now()
	tr, err := transport.Start(context.Background(), cfg)
	if err == nil {
		tr.Close(context.Background())
		t.Fatalf("Start succeeded; want an error naming %q", want)
	}
	t.Logf("Start failed after %v: %v", time.Since(began).Round(time.Millisecond), err)
	if !errors.Is(err, transport.ErrAdmin) || transport.Classify(err) != transport.Fail {
		t.Errorf("Start: %v (classified %v); want ErrAdmin, fail", err, transport.Classify(err))
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Start: %q does not name the cause %q", err, want)
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		t.Errorf("Start's error shows the secret: %q", err)
	}
}

// TestSecuredSASLSSL runs the conformance suite over SASL_SSL, with SCRAM-SHA-256 through the
// process links (TLS in the link, SASL in the transport) and with SCRAM-SHA-512 on the
// bootstrap addresses (TLS and SASL in the transport), and checks that a wrong password, an
// unknown CA and an expired certificate fail Start with a classified error that names the
// cause and not the secret.
func TestSecuredSASLSSL(t *testing.T) {
	// The secured tests and TestPipelineConformance run side by side once the package's other
	// tests are done (parallel tests start after them): each secured test has a one-broker
	// cluster of its own, and the pipeline suites only wait on the shared one.
	t.Parallel()
	c := securedCluster(t, "sasl-ssl")
	admin := c.ClientSecurity()
	if admin.Protocol() != "SASL_SSL" || admin.Password == "" {
		t.Fatalf("client security %v: want SASL_SSL with a password", admin)
	}
	dial := processLinks(t, c, 90)
	bootstrap := strings.Join(c.Bootstrap(), ",")
	t.Run("SCRAM-SHA-256 through the links", func(t *testing.T) {
		sec := asTransport(admin.SASLOnly())
		sec.SASLMechanism = transport.SASLScramSHA256
		transporttest.Run(t, transporttest.Env{Bootstrap: bootstrap, Dial: dial, Security: sec,
			TransactionVersion: 2, Replication: 1, New: transporttest.Start})
	})
	t.Run("SCRAM-SHA-512 on the bootstrap addresses", func(t *testing.T) {
		transporttest.Run(t, transporttest.Env{Bootstrap: bootstrap, Security: asTransport(admin),
			TransactionVersion: 2, Replication: 1, New: transporttest.Start})
	})
	t.Run("ACLs - denied transactional id and topic write", func(t *testing.T) { authorization(t, c) })
	t.Run("wrong password - ErrAdmin naming SASL authentication, not the password", func(t *testing.T) {
		sec := asTransport(admin)
		sec.Password = "wrong-" + admin.Password[:6]
		startErr(t, c, sec, "SASL authentication failed", sec.Password)
	})
	t.Run("unknown CA - ErrAdmin naming the unknown authority", func(t *testing.T) {
		sec := asTransport(admin)
		sec.TLS = &tls.Config{RootCAs: x509.NewCertPool()}
		startErr(t, c, sec, "unknown certificate authority", admin.Password)
	})
	t.Run("expired broker certificate - ErrAdmin naming the expiry", func(t *testing.T) {
		sec := asTransport(admin)
		sec.TLS = admin.TLS.Clone()
		// Seen from ten years ahead, the broker's certificate has expired.
		sec.TLS.Time = func() time.Time { return time.Now().AddDate(10, 0, 0) }
		startErr(t, c, sec, "expired", admin.Password)
	})
}

// TestSecuredMutualTLS runs the conformance suite over TLS with a client certificate, and
// checks that a certificate the brokers do not trust, or an expired one, fails Start with a
// classified error naming the rejected certificate.
func TestSecuredMutualTLS(t *testing.T) {
	t.Parallel() // see TestSecuredSASLSSL
	c := securedCluster(t, "tls")
	admin := c.ClientSecurity()
	if admin.Protocol() != "SSL" || len(admin.TLS.Certificates) == 0 {
		t.Fatalf("client security %v: want SSL with a client certificate", admin)
	}
	bootstrap := strings.Join(c.Bootstrap(), ",")
	t.Run("conformance", func(t *testing.T) {
		transporttest.Run(t, transporttest.Env{Bootstrap: bootstrap, Security: asTransport(admin),
			TransactionVersion: 2, Replication: 1, New: transporttest.Start})
	})
	t.Run("expired client certificate - ErrAdmin naming the rejected certificate", func(t *testing.T) {
		cert, err := c.ClientCertificate("fencecheck", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		sec := asTransport(admin)
		sec.TLS = admin.TLS.Clone()
		sec.TLS.Certificates = []tls.Certificate{cert}
		startErr(t, c, sec, "rejected this client's certificate", "")
	})
	t.Run("no client certificate - ErrAdmin naming the rejected certificate", func(t *testing.T) {
		sec := asTransport(admin)
		sec.TLS = admin.TLS.Clone()
		sec.TLS.Certificates = nil
		startErr(t, c, sec, "rejected this client's certificate", "")
	})
}

// authorization checks what a principal gets from the standard authorizer: one allowed the
// transactional id of role "allowed" and the topic, and denied role "denied"; and one that
// may read and describe the topic but not write it.
func authorization(t *testing.T, c *local.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := c.ClientSecurity()
	cl, err := cluster.AdminClient(c, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "acl-test"
	member := user(t, ctx, adm, admin.TLS, "member")
	reader := user(t, ctx, adm, admin.TLS, "reader")
	acls := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:member").AllowHosts().Topics(topic).Operations(kadm.OpAll),
		kadm.NewACLs().Allow("User:member").AllowHosts().TransactionalIDs(topic+"/allowed").Operations(kadm.OpWrite, kadm.OpDescribe),
		kadm.NewACLs().Deny("User:member").DenyHosts().TransactionalIDs(topic + "/denied").Operations(kadm.OpAll),
		kadm.NewACLs().Allow("User:reader").AllowHosts().Topics(topic).Operations(kadm.OpRead, kadm.OpDescribe),
		kadm.NewACLs().Allow("User:reader").AllowHosts().TransactionalIDs(topic+"/allowed").Operations(kadm.OpWrite, kadm.OpDescribe),
	}
	for _, b := range acls {
		b.ResourcePatternType(kadm.ACLPatternLiteral)
		res, err := adm.CreateACLs(ctx, b)
		if err == nil {
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			t.Fatalf("create ACLs: %v", err)
		}
	}
	open := func(u *cluster.Security) *transport.BrokerTransport {
		cfg := transport.NewConfig(strings.Join(c.Bootstrap(), ","), 10*time.Second)
		cfg.Topic, cfg.TopicPartitions, cfg.TopicReplication = topic, 1, 1
		cfg.RequestTimeout = 5 * time.Second
		cfg.Security = asTransport(u)
		tr, err := transport.Start(ctx, cfg)
		if err != nil {
			t.Fatalf("start as %s: %v", u.Username, err)
		}
		t.Cleanup(func() { tr.Close(context.Background()) })
		return tr
	}
	// The admin creates the topic: members may not create topics.
	if _, err := open(admin).EnsureTopic(ctx, topic, 1); err != nil {
		t.Fatal(err)
	}
	tm := open(member)
	// ACLs reach the broker through the metadata log: wait until the allowed role works.
	var tok transport.FencingToken
	for {
		if tok, err = tm.AcquireEpoch(ctx, "allowed"); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("acquire the allowed role: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the broker's view of the ACLs
	}
	if err := tm.WriteLease(ctx, "allowed", tok, transport.Lease{Holder: "m", Seq: 1, Duration: time.Second}); err != nil {
		t.Fatalf("write under the allowed role: %v", err)
	}

	t.Run("acquire a denied role - ErrProducer naming the authorization failure, fail, no token", func(t *testing.T) {
		got, err := tm.AcquireEpoch(ctx, "denied")
		t.Logf("acquire denied: %v, %v", got, err)
		if err == nil {
			t.Fatalf("acquired the denied role: %v", got)
		}
		if !errors.Is(err, transport.ErrProducer) || transport.Classify(err) != transport.Fail {
			t.Errorf("acquire: %v (classified %v); want ErrProducer, fail", err, transport.Classify(err))
		}
		if !strings.Contains(err.Error(), "not authorized") || !strings.Contains(err.Error(), "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") {
			t.Errorf("acquire: %q does not name the authorization failure", err)
		}
		if _, held := tm.HeldToken("denied"); held || !got.IsZero() {
			t.Errorf("a denied acquire left a token: %v", got)
		}
		if strings.Contains(err.Error(), member.Password) {
			t.Errorf("error shows the password: %q", err)
		}
	})
	t.Run("principal without write access - register and write refused, read works", func(t *testing.T) {
		tr := open(reader)
		_, err := tr.Register(ctx, "allowed", "r")
		t.Logf("register: %v", err)
		if !errors.Is(err, transport.ErrProducer) || transport.Classify(err) != transport.Fail || !strings.Contains(err.Error(), "not authorized") {
			t.Errorf("register: %v (classified %v); want ErrProducer naming the authorization failure, fail", err, transport.Classify(err))
		}
		tok, err := tr.AcquireEpoch(ctx, "allowed")
		if err != nil {
			t.Fatalf("acquire (the reader may use the transactional id): %v", err)
		}
		err = tr.WriteLease(ctx, "allowed", tok, transport.Lease{Holder: "r", Seq: 2, Duration: time.Second})
		t.Logf("write: %v", err)
		if !errors.Is(err, transport.ErrProducer) || transport.Classify(err) != transport.Fail || !strings.Contains(err.Error(), "not authorized") {
			t.Errorf("write: %v (classified %v); want ErrProducer naming the authorization failure, fail", err, transport.Classify(err))
		}
		rr, err := tr.ReadRoleRecords(ctx, "allowed")
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if len(rr.Leases) != 1 || rr.Leases[0].Lease.Holder != "m" {
			t.Errorf("read %+v; want the member's lease only", rr)
		}
	})
}

// user creates a SCRAM-SHA-512 user with a random password and returns its credentials.
func user(t *testing.T, ctx context.Context, adm *kadm.Client, conf *tls.Config, name string) *cluster.Security {
	t.Helper()
	pw := fmt.Sprintf("pw-%s-%d", name, time.Now().UnixNano())
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: name, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pw}})
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return &cluster.Security{TLS: conf, SASLMechanism: cluster.SASLScramSHA512, Username: name, Password: pw}
}
