package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
)

// PushImage pushes an image of one layer, holding the file at path
// (mode 0755), to the registry at host:port (plain HTTP) as repo:tag,
// with entrypoint and user: what a FROM scratch image of one static
// executable is. It returns the manifest's digest.
func PushImage(registry, repo, tag, path string, content []byte, entrypoint []string, user string) (string, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		return "", err
	}
	if _, err := tw.Write(content); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	diffID := digest(layer.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(layer.Bytes()); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "User": user},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return "", err
	}
	base := "http://" + registry + "/v2/" + repo
	for _, blob := range [][]byte{gz.Bytes(), config} {
		if err := pushBlob(base, blob); err != nil {
			return "", err
		}
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(gz.Bytes()), "size": gz.Len()}},
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequest(http.MethodPut, base+"/manifests/"+tag, bytes.NewReader(manifest))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	if err := do(req, http.StatusCreated); err != nil {
		return "", fmt.Errorf("push the manifest of %s:%s: %w", repo, tag, err)
	}
	return digest(manifest), nil
}

func digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

// pushBlob uploads one blob in a single PUT (the registry API's
// monolithic upload).
func pushBlob(base string, blob []byte) error {
	resp, err := http.Post(base+"/blobs/uploads/", "application/octet-stream", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("start an upload to %s: HTTP %d", base, resp.StatusCode)
	}
	loc, err := resp.Location()
	if err != nil {
		return err
	}
	q := loc.Query()
	q.Set("digest", digest(blob))
	loc.RawQuery = q.Encode()
	req, err := http.NewRequest(http.MethodPut, loc.String(), bytes.NewReader(blob))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return do(req, http.StatusCreated)
}

func do(req *http.Request, want int) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s %s: HTTP %d: %s", req.Method, (&url.URL{Path: req.URL.Path}).String(), resp.StatusCode, b)
	}
	return nil
}
