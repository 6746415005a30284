package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// identity is one certificate the cluster's parts present: a client's
// user and groups (CN, O), and for a server the names it answers to.
type identity struct {
	file   string // pki/FILE.crt and pki/FILE.key
	cn     string
	orgs   []string
	server bool
	dns    []string
	ips    []net.IP
}

// identities are every certificate the cluster needs, as a kubeadm node
// has them: the API server's serving certificate, the clients of the API
// server (the admin, the controller manager, the scheduler, the kubelet
// with its node's name), the API server as a client of the kubelet, and
// the kubelet's serving certificate.
func identities(node string, ip net.IP) []identity {
	return []identity{
		{file: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost", node},
			ips: []net.IP{ip, net.IPv4(127, 0, 0, 1), net.ParseIP(serviceIP)}},
		{file: "admin", cn: "kubernetes-admin", orgs: []string{"system:masters"}},
		{file: "controller-manager", cn: "system:kube-controller-manager"},
		{file: "scheduler", cn: "system:kube-scheduler"},
		{file: "kubelet", cn: "system:node:" + node, orgs: []string{"system:nodes"}},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		{file: "kubelet-serving", cn: node, server: true, dns: []string{node}, ips: []net.IP{ip}},
	}
}

// makePKI writes a CA, every identity's certificate and key, and the
// service accounts' signing key into dir.
func makePKI(dir, node string, ip net.IP) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nwk8s-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(48 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePair(dir, "ca", caDER, caKey); err != nil {
		return err
	}
	for i, id := range identities(node, ip) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)),
			Subject:      pkix.Name{CommonName: id.cn, Organization: id.orgs},
			NotBefore:    now,
			NotAfter:     now.Add(48 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			DNSNames:     id.dns,
			IPAddresses:  id.ips,
		}
		if id.server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("certificate %s: %w", id.file, err)
		}
		if err := writePair(dir, id.file, der, key); err != nil {
			return err
		}
	}
	// The service account tokens' key: RSA, which every part accepts.
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saKey, err := x509.MarshalPKCS8PrivateKey(sa)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKey}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}), 0o644)
}

func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// kubeconfig is a kubeconfig file for one identity of dir's PKI.
func kubeconfig(dir, id, server string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: nwk8s
    cluster:
      server: %s
      certificate-authority: %s
users:
  - name: %s
    user:
      client-certificate: %s
      client-key: %s
contexts:
  - name: nwk8s
    context: {cluster: nwk8s, user: %s}
current-context: nwk8s
`, server, filepath.Join(dir, "ca.crt"), id, filepath.Join(dir, id+".crt"), filepath.Join(dir, id+".key"), id)
}
