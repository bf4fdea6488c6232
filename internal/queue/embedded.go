package queue

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configure the JetStream server a study starts when none is configured.
type EmbeddedOptions struct {
	// Listen is host:port; port 0 reuses the port of the last run when it is free (so that
	// workers waiting on it reconnect), else any free one. Default 127.0.0.1:0.
	Listen string
	// StoreDir keeps JetStream's files: jobs not yet done survive a restart.
	StoreDir string
	Auth     Auth
}

// Embedded is a JetStream server running in this process.
type Embedded struct {
	srv     *server.Server
	urlFile string
}

// URLFile is where a running embedded server writes its client URL, for workers on this host
// to find it (kbplatform worker with no cluster.url).
func URLFile(storeDir string) string { return filepath.Join(storeDir, "url") }

// Loopback says whether a listen address takes connections from this host only.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// StartEmbedded starts the server and writes its URL file.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	host, portStr, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster.listen %q: %w", o.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("cluster.listen %q: bad port", o.Listen)
	}
	if err := o.Auth.check(); err != nil {
		return nil, err
	}
	if !Loopback(host) && o.Auth.Empty() {
		return nil, fmt.Errorf("cluster.listen %s reaches beyond this host: set cluster.user and cluster.password, or cluster.nkey_file, in kbplatform.yaml (the server refuses unauthenticated clients there)", o.Listen)
	}
	if err := os.MkdirAll(o.StoreDir, 0o700); err != nil {
		return nil, err
	}
	if port == 0 {
		port = previousPort(URLFile(o.StoreDir), host)
	}
	opts := &server.Options{ServerName: "kbplatform", Host: host, Port: port, JetStream: true, StoreDir: o.StoreDir,
		NoSigs: true, NoLog: true, MaxPayload: 8 << 20, HTTPPort: 0}
	switch {
	case o.Auth.User != "":
		opts.Username, opts.Password = o.Auth.User, o.Auth.Password
	case o.Auth.NkeyFile != "":
		kp, err := o.Auth.seed()
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, err
		}
		opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded JetStream server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded JetStream server on %s did not start within 30 s (port taken?)", o.Listen)
	}
	e := &Embedded{srv: srv, urlFile: URLFile(o.StoreDir)}
	if err := os.WriteFile(e.urlFile, []byte(e.URL()+"\n"), 0o600); err != nil {
		srv.Shutdown()
		return nil, err
	}
	return e, nil
}

// previousPort is the port of the last embedded server over this store when it is free now.
func previousPort(urlFile, host string) int {
	b, err := os.ReadFile(urlFile)
	if err != nil {
		return server.RANDOM_PORT
	}
	u := strings.TrimSpace(string(b))
	i := strings.LastIndexByte(u, ':')
	if i < 0 {
		return server.RANDOM_PORT
	}
	p, err := strconv.Atoi(u[i+1:])
	if err != nil || p <= 0 {
		return server.RANDOM_PORT
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
	if err != nil {
		return server.RANDOM_PORT
	}
	l.Close()
	return p
}

// URL is the client URL.
func (e *Embedded) URL() string { return e.srv.ClientURL() }

// Close stops the server. Its URL file stays: the next embedded server over the same store takes
// the same port when it can, and workers still trying it reconnect.
func (e *Embedded) Close() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
