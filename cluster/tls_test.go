package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, file: filepath.Join(t.TempDir(), "ca.pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue makes a node certificate for 127.0.0.1, good as server and
// client (routes verify both ends), and returns its cert and key files.
func (ca *testCA) issue(t *testing.T, node string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: node},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kb)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSRoutes: nodes whose routes use TLS with certificates of the
// cluster's CA form a cluster; a node with a certificate of another CA
// (and the right token) cannot join.
func TestTLSRoutes(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "shard cluster CA")
	h := newHarness(t, 2)
	h.modify = func(i int, c *Config) {
		c.TLSCert, c.TLSKey = ca.issue(t, c.Node)
		c.TLSCA = ca.file
	}
	h.startAll()
	waitFor(t, h.node(0), "two alive members", allAlive("n1", "n2"))
	if h.node(0).srv.NumRoutes() == 0 {
		t.Fatal("n1 has no route")
	}

	other := newTestCA(t, "another CA")
	cert, key := other.issue(t, "n3")
	cfg := Config{
		Node: "n3", Listen: "127.0.0.1:-1", Routes: []string{h.mesh.Front(0).URL(), h.mesh.Front(1).URL()},
		Token: h.token, TLSCert: cert, TLSKey: key, TLSCA: other.file,
		StoreDir: t.TempDir(), Lease: testLease, ReadyTimeout: 3 * testLease,
	}
	n, err := Start(context.Background(), cfg, testLogger(t, "n3"))
	if err == nil {
		n.Close()
		t.Fatal("a node with another CA's certificate joined")
	}
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("err = %v, want ErrNotReady", err)
	}
	for _, m := range h.node(0).Members() {
		if m.Node == "n3" {
			t.Errorf("n3 is a member: %+v", m)
		}
	}
}
