package kraft

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"hash"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
)

// Security modes of the CLIENT listener (Config.Security). Inter-broker and controller
// traffic stays plaintext on REPL and CONTROLLER.
const (
	// SecurityTLS: SSL with mutual TLS; the client certificate's CN is the principal.
	SecurityTLS = "tls"
	// SecuritySASLScram: SASL_PLAINTEXT with SCRAM-SHA-256 and SCRAM-SHA-512.
	SecuritySASLScram = "sasl-scram"
	// SecuritySASLSSL: SASL_SSL (server-verified TLS) with SCRAM-SHA-256 and SCRAM-SHA-512.
	SecuritySASLSSL = "sasl-ssl"
)

// SecurityModes lists the modes Config.Security may name ("" is plaintext).
var SecurityModes = []string{SecurityTLS, SecuritySASLScram, SecuritySASLSSL}

// AdminUser is the principal of the cluster's own clients (health checks, the harness's admin
// requests, final reads) and of the certificate and SCRAM credentials it generates. It is a
// super user; the standard authorizer applies to every other principal.
const AdminUser = "fencecheck"

// scramIterations is the PBKDF2 iteration count of the credentials made at format time
// (Kafka's minimum is 4096).
const scramIterations = 4096

// CheckSecurity validates a security mode; errors name the Options field.
func CheckSecurity(mode string) error {
	switch mode {
	case "", SecurityTLS, SecuritySASLScram, SecuritySASLSSL:
		return nil
	}
	return &cluster.OptionError{Field: "Security", Value: mode, Reason: "want " + strings.Join(SecurityModes, ", ") + " or empty (plaintext)"}
}

// material is what a secured cluster generates at start: a CA, the brokers' certificate,
// the admin's client certificate and SCRAM password. Files live in <Dir>/security, the key
// and password files readable by the owner only.
type material struct {
	mode     string
	dir      string
	caCert   *x509.Certificate
	caKey    *ecdsa.PrivateKey
	caPEM    []byte
	client   tls.Certificate
	password string
}

// Paths of the generated files, relative to the security folder.
const (
	caFile           = "ca.pem"         // the CA certificate: the brokers' and clients' trust store
	brokerFile       = "broker.pem"     // the brokers' private key and certificate (PEM key store)
	clientCertFile   = "client.pem"     // the admin's client certificate
	clientKeyFile    = "client-key.pem" // its private key
	adminPasswordFil = "admin.password" // the admin's SCRAM password
)

func newMaterial(mode, dir string) (*material, error) {
	m := &material{mode: mode, dir: filepath.Join(dir, "security")}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, err
	}
	var err error
	if m.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "fencecheck test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &m.caKey.PublicKey, m.caKey)
	if err != nil {
		return nil, err
	}
	if m.caCert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	m.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(m.path(caFile), m.caPEM, 0o644); err != nil {
		return nil, err
	}

	// One certificate for every broker: they all listen on loopback, under these names.
	certPEM, keyPEM, err := m.Issue("fencecheck broker", []string{"localhost", "127.0.0.1", "::1"}, now.Add(-time.Hour), now.Add(30*24*time.Hour))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.path(brokerFile), append(keyPEM, certPEM...), 0o600); err != nil {
		return nil, err
	}
	certPEM, keyPEM, err = m.Issue(AdminUser, nil, now.Add(-time.Hour), now.Add(30*24*time.Hour))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.path(clientCertFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.path(clientKeyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if m.client, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, err
	}
	var pw [18]byte
	if _, err := rand.Read(pw[:]); err != nil {
		return nil, err
	}
	m.password = hex.EncodeToString(pw[:])
	if err := os.WriteFile(m.path(adminPasswordFil), []byte(m.password+"\n"), 0o600); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *material) path(name string) string { return filepath.Join(m.dir, name) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// Issue signs a certificate with the cluster's CA: a server certificate for hosts (names or
// IP addresses), or a client certificate whose subject is CN=name when hosts is empty. It
// returns the certificate and its PKCS#8 private key, PEM-encoded.
func (m *material) Issue(name string, hosts []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, m.caCert, &key.PublicKey, m.caKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// tls reports whether the mode's listener speaks TLS.
func (m *material) tls() bool { return m.mode == SecurityTLS || m.mode == SecuritySASLSSL }

// sasl reports whether the mode's listener authenticates with SASL.
func (m *material) sasl() bool { return m.mode == SecuritySASLScram || m.mode == SecuritySASLSSL }

// protocol is the CLIENT listener's security protocol.
func (m *material) protocol() string {
	switch m.mode {
	case SecurityTLS:
		return "SSL"
	case SecuritySASLScram:
		return "SASL_PLAINTEXT"
	}
	return "SASL_SSL"
}

// clientTLS is the TLS configuration of a client of this cluster: it trusts the cluster's CA
// and, in mutual TLS, presents the admin's certificate.
func (m *material) clientTLS() *tls.Config {
	if !m.tls() {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(m.caCert)
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if m.mode == SecurityTLS {
		c.Certificates = []tls.Certificate{m.client}
	}
	return c
}

// security is the admin's client security.
func (m *material) security() *cluster.Security {
	s := &cluster.Security{TLS: m.clientTLS()}
	if m.sasl() {
		s.SASLMechanism, s.Username, s.Password = cluster.SASLScramSHA512, AdminUser, m.password
	}
	return s
}

// properties are the server.properties entries of the secured CLIENT listener and the
// authorizer. REPL and CONTROLLER stay plaintext; their principal is ANONYMOUS, a super user
// like the admin, so only clients are subject to ACLs.
func (m *material) properties() map[string]string {
	p := map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:ANONYMOUS;User:" + AdminUser,
	}
	const l = "listener.name.client."
	if m.tls() {
		p[l+"ssl.keystore.type"] = "PEM"
		p[l+"ssl.keystore.location"] = m.path(brokerFile)
		p[l+"ssl.truststore.type"] = "PEM"
		p[l+"ssl.truststore.location"] = m.path(caFile)
		p[l+"ssl.client.auth"] = "none"
	}
	if m.mode == SecurityTLS {
		p[l+"ssl.client.auth"] = "required"
		// The principal of a client certificate is its CN ("User:fencecheck"), not the whole
		// distinguished name.
		p["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+)$/$1/,DEFAULT"
	}
	if m.sasl() {
		p[l+"sasl.enabled.mechanisms"] = "SCRAM-SHA-256,SCRAM-SHA-512"
		for _, mech := range []string{"scram-sha-256", "scram-sha-512"} {
			p[l+mech+".sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		}
	}
	return p
}

// formatArgs are the storage tool's --add-scram arguments: the admin's SCRAM credentials for
// both mechanisms, given as salt and salted password so that the password itself never
// appears on a command line. The salted password does, while the tool runs, and SCRAM accepts
// it in place of the password (docs/security.md says so).
func (m *material) formatArgs() ([]string, error) {
	if !m.sasl() {
		return nil, nil
	}
	var args []string
	for _, mech := range []struct {
		name string
		h    func() hash.Hash
		size int
	}{{"SCRAM-SHA-256", sha256.New, sha256.Size}, {"SCRAM-SHA-512", sha512.New, sha512.Size}} {
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return nil, err
		}
		salted, err := pbkdf2.Key(mech.h, m.password, salt, scramIterations, mech.size)
		if err != nil {
			return nil, err
		}
		args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,iterations=%d,salt=%q,saltedpassword=%q]",
			mech.name, AdminUser, scramIterations, base64.StdEncoding.EncodeToString(salt), base64.StdEncoding.EncodeToString(salted)))
	}
	return args, nil
}
