package main_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
)

// certs writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, as PEM files in dir.
type certs struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func makeCerts(t *testing.T, dir string) certs {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redislock test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		kder, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	c := certs{ca: write("ca.pem", "CERTIFICATE", caDER)}
	c.serverCert, c.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	c.clientCert, c.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return c
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// A redis-server with a TLS port (beside its plain one, which the test uses
// to set it up), with a certificate the test makes.
func TestTLS(t *testing.T) {
	cs := makeCerts(t, t.TempDir())
	port := freePort(t)
	srv := redistest.Start(t, "--tls-port", port, "--tls-cert-file", cs.serverCert, "--tls-key-file", cs.serverKey,
		"--tls-ca-cert-file", cs.ca, "--tls-auth-clients", "no")
	aclUser(t, srv, "locker", "pw", aclRules)
	tlsAddr := "127.0.0.1:" + port
	for _, tc := range []struct {
		name string
		args []string
		want int
		say  string
	}{
		{"TLS", []string{"--addr", "rediss://" + tlsAddr, "--tls-ca", cs.ca, "run", "k", "--", "true"}, 0, ""},
		{"TLS and ACL user", []string{"--addr", "rediss://locker:pw@" + tlsAddr, "--tls-ca", cs.ca, "run", "k", "--", "true"}, 0, ""},
		{"TLS inspect", []string{"--addr", "rediss://" + tlsAddr, "--tls-ca", cs.ca, "inspect", "k"}, 0, ""},
		{"unknown CA", []string{"--addr", "rediss://" + tlsAddr, "run", "k", "--", "true"}, 69, "certificate"},
		{"plain to the TLS port", []string{"--addr", "redis://" + tlsAddr, "run", "k", "--", "true"}, 69, ""},
		{"--tls-ca without rediss", []string{"--addr", "redis://" + tlsAddr, "--tls-ca", cs.ca, "run", "k", "--", "true"}, 64, "rediss://"},
		{"missing CA file", []string{"--addr", "rediss://" + tlsAddr, "--tls-ca", "/nonexistent", "run", "k", "--", "true"}, 64, "--tls-ca"},
	} {
		code, _, stderr := result(t, tc.args...)
		assert.False(t, code != tc.want || !strings.Contains(stderr, tc.say), "%s: exit %d, stderr %q; want %d and %q", tc.name, code, stderr, tc.want, tc.say)
	}

	// Client certificates required.
	_, err := srv.Do("CONFIG", "SET", "tls-auth-clients", "yes")
	require.NoError(t, err)
	if code, _, stderr := result(t, "--addr", "rediss://"+tlsAddr, "--tls-ca", cs.ca, "run", "k", "--", "true"); code != 69 {
		t.Errorf("no client certificate: exit %d (%s), want 69", code, stderr)
	}
	if code, _, stderr := result(t, "--addr", "rediss://"+tlsAddr, "--tls-ca", cs.ca, "--tls-cert", cs.clientCert, "--tls-key", cs.clientKey, "run", "k", "--", "true"); code != 0 {
		t.Errorf("client certificate: exit %d: %s", code, stderr)
	}
}
