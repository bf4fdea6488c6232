package queue

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Auth is how a client proves itself, and what an embedded server demands. It comes from the
// configuration file, never from the command line (where `ps` would show it).
type Auth struct {
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	// NkeyFile holds an nkey seed (SU...) or a decorated seed file as nsc writes it.
	NkeyFile string `json:"nkey_file,omitempty"`
}

// Empty says no credentials are configured.
func (a Auth) Empty() bool { return a.User == "" && a.Password == "" && a.NkeyFile == "" }

func (a Auth) check() error {
	if (a.User == "") != (a.Password == "") {
		return fmt.Errorf("cluster credentials: give both user and password, or neither")
	}
	if a.User != "" && a.NkeyFile != "" {
		return fmt.Errorf("cluster credentials: give user and password, or an nkey file, not both")
	}
	return nil
}

// seed reads the nkey seed file.
func (a Auth) seed() (nkeys.KeyPair, error) {
	b, err := os.ReadFile(a.NkeyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster nkey file: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		kp, err = nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
	}
	if err != nil {
		return nil, fmt.Errorf("cluster nkey file %s: not an nkey seed: %w", a.NkeyFile, err)
	}
	return kp, nil
}

// Conn is a connection to the JetStream server, with the stream and buckets set up.
type Conn struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Results jetstream.KeyValue
	Workers jetstream.KeyValue
}

// Dial connects to url and sets the stream and buckets up. The connection keeps reconnecting for
// as long as it lives: a server restarted mid-study is waited for, not an error.
func Dial(ctx context.Context, url, name string, auth Auth) (*Conn, error) {
	return dial(ctx, url, name, auth, -1)
}

// DialOnce is Dial for a probe: no reconnecting.
func DialOnce(ctx context.Context, url, name string, auth Auth) (*Conn, error) {
	return dial(ctx, url, name, auth, 0)
}

func dial(ctx context.Context, url, name string, auth Auth, reconnects int) (*Conn, error) {
	if err := auth.check(); err != nil {
		return nil, err
	}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(reconnects), nats.ReconnectWait(500 * time.Millisecond),
		nats.ReconnectBufSize(-1), nats.Timeout(2 * time.Second)}
	switch {
	case auth.User != "":
		opts = append(opts, nats.UserInfo(auth.User, auth.Password))
	case auth.NkeyFile != "":
		kp, err := auth.seed()
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster server %s: %w", url, err)
	}
	c := &Conn{NC: nc}
	if c.JS, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := Setup(sctx, c.JS); err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster server %s: %w", url, err)
	}
	if c.Results, err = c.JS.KeyValue(sctx, ResultsBucket); err != nil {
		nc.Close()
		return nil, err
	}
	if c.Workers, err = c.JS.KeyValue(sctx, WorkersBucket); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Close drains nothing: what was not acked is redelivered.
func (c *Conn) Close() { c.NC.Close() }
