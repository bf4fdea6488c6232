package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// errHolderGone means the holder stopped answering: it finished or died. The store then takes the
// database over (Store.do).
var errHolderGone = errors.New("the kbplatform process holding the database went away")

// remoteKV reads and writes through the holder's socket.
type remoteKV struct {
	c    *http.Client
	path string
}

func dialHolder(dir string) (*remoteKV, HolderInfo, error) {
	var info HolderInfo
	path, err := socketPath(dir)
	if err != nil {
		return nil, info, err
	}
	r := &remoteKV{path: path, c: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", path)
			if err != nil {
				return nil, err
			}
			if err := checkPeer(c, "the database's socket "+path); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
		MaxIdleConns: 2,
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://kbplatform"+pathHolder, nil)
	resp, err := r.c.Do(req)
	if err != nil {
		return nil, info, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, info, fmt.Errorf("holder's answer: %w", err)
	}
	return r, info, nil
}

func (r *remoteKV) close() error {
	r.c.CloseIdleConnections()
	return nil
}

// gone wraps a transport error: the holder is no longer there.
func gone(err error) error { return fmt.Errorf("%w: %v", errHolderGone, err) }

func statusErr(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("database holder: %s: %s", resp.Status, bytes.TrimSpace(b))
}

func (r *remoteKV) get(key string) ([]byte, error) {
	resp, err := r.c.Get("http://kbplatform" + pathGet + "?key=" + url.QueryEscape(key))
	if err != nil {
		return nil, gone(err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, gone(err)
		}
		return b, nil
	case http.StatusNotFound:
		return nil, ErrNotFound
	}
	return nil, statusErr(resp)
}

func (r *remoteKV) scan(prefix string, reverse bool, fn func(key, val []byte) (bool, error)) error {
	q := url.Values{"prefix": {prefix}}
	if reverse {
		q.Set("reverse", "1")
	}
	resp, err := r.c.Get("http://kbplatform" + pathScan + "?" + q.Encode())
	if err != nil {
		return gone(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusErr(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<30)
	delivered := false
	for sc.Scan() {
		var line struct {
			pair
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("database holder: %w", err)
		}
		if line.Error != "" {
			return fmt.Errorf("database holder: %s", line.Error)
		}
		delivered = true
		cont, err := fn(line.K, line.V)
		if err != nil || !cont {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if delivered {
			// Part of the listing was handed out already: a retry would repeat it.
			return fmt.Errorf("the kbplatform process holding the database went away during a listing: %w", err)
		}
		return gone(err)
	}
	return nil
}

func (r *remoteKV) put(kvs map[string][]byte) error {
	body := struct {
		KVs []pair `json:"kvs"`
	}{}
	for k, v := range kvs {
		body.KVs = append(body.KVs, pair{K: []byte(k), V: v})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := r.c.Post("http://kbplatform"+pathPut, "application/json", bytes.NewReader(b))
	if err != nil {
		return gone(err) // a put is idempotent: repeating it is safe
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return statusErr(resp)
	}
	return nil
}
