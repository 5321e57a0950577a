package scenarios

import (
	"fmt"
	"slices"
	"strings"
)

// Security modes of cluster.security (and --security): how the cluster's client listener
// authenticates clients. A local or containers cluster generates its certificates and SCRAM
// credentials at start; an external cluster's credentials come from the environment.
const (
	SecurityTLS       = "tls"        // SSL, mutual TLS
	SecuritySASLScram = "sasl-scram" // SASL_PLAINTEXT with SCRAM
	SecuritySASLSSL   = "sasl-ssl"   // SASL_SSL with SCRAM
)

// SecurityModes lists the modes cluster.security may name ("" is plaintext).
var SecurityModes = []string{SecurityTLS, SecuritySASLScram, SecuritySASLSSL}

// validSecurity names the problem with mode, nil when it is fine for kind.
func validSecurity(mode, kind string) error {
	if mode == "" {
		return nil
	}
	if !slices.Contains(SecurityModes, mode) {
		return fmt.Errorf("cluster.security: %q is not one of %s", mode, strings.Join(SecurityModes, ", "))
	}
	if kind == KindEmbedded {
		return fmt.Errorf("cluster.security: the embedded cluster (kfake) has no TLS or SASL listener; use local, containers or external")
	}
	return nil
}
