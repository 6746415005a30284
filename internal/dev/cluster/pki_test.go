package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPKI: every certificate is signed by the CA and says who it is as
// the API server reads it (the user in CN, the groups in O), and the
// servers' name the addresses clients dial.
func TestPKI(t *testing.T) {
	dir := t.TempDir()
	ip := net.ParseIP("10.254.0.2")
	if err := makePKI(dir, NodeName, ip); err != nil {
		t.Fatal(err)
	}
	read := func(name string) *x509.Certificate {
		b, err := os.ReadFile(filepath.Join(dir, name+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pool := x509.NewCertPool()
	pool.AddCert(read("ca"))
	for _, id := range identities(NodeName, ip) {
		c := read(id.file)
		usage := x509.ExtKeyUsageClientAuth
		if id.server {
			usage = x509.ExtKeyUsageServerAuth
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s: %v", id.file, err)
		}
		if c.Subject.CommonName != id.cn || !slices.Equal(c.Subject.Organization, id.orgs) {
			t.Errorf("%s: subject %v, want CN %s O %v", id.file, c.Subject, id.cn, id.orgs)
		}
	}
	if err := read("apiserver").VerifyHostname("10.254.0.2"); err != nil {
		t.Errorf("the API server's certificate: %v", err)
	}
	if err := read("kubelet-serving").VerifyHostname(NodeName); err != nil {
		t.Errorf("the kubelet's certificate: %v", err)
	}
	if c := read("kubelet"); c.Subject.CommonName != "system:node:"+NodeName {
		t.Errorf("the kubelet's client certificate is %s: the Node authorizer knows a node by system:node:NAME", c.Subject.CommonName)
	}
	kc := kubeconfig(dir, "admin", "https://10.254.0.2:6443")
	for _, want := range []string{"server: https://10.254.0.2:6443", filepath.Join(dir, "admin.crt"), filepath.Join(dir, "ca.crt")} {
		if !strings.Contains(kc, want) {
			t.Errorf("the admin's kubeconfig lacks %q", want)
		}
	}
}
