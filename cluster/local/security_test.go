package local_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

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
	c := securedCluster(t, "sasl-ssl")
	admin := c.ClientSecurity()
	if admin.Protocol() != "SASL_SSL" || admin.Password == "" {
		t.Fatalf("client security %v: want SASL_SSL with a password", admin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial, err := c.Links(ctx, 90)
	if err != nil {
		t.Fatal(err)
	}
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
