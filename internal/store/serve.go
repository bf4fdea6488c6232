package store

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// The holder's API, served over a unix socket beside the database (docs/store-api.md). It is a
// key-value API on purpose: every record kind, present and future, goes through the same three
// calls, and a reader (a second command, a web viewer) decodes records with this package.
const (
	pathHolder = "/v1/holder" // GET: who holds the database
	pathGet    = "/v1/get"    // GET ?key=K: one value (404: not found)
	pathScan   = "/v1/scan"   // GET ?prefix=P&reverse=1: the records under P, one JSON line each
	pathPut    = "/v1/put"    // POST {"kvs":[{"k":..,"v":..}]}: written in one synced transaction
	pathBackup = "/v1/backup" // GET: a backup of every record (Badger's stream format)

	trailerBackupError = "Kbplatform-Backup-Error" // set when the backup stream broke off
	maxSockLen         = 100                       // sun_path holds 108 bytes
)

// HolderInfo says which process holds a database.
type HolderInfo struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	Dir     string    `json:"dir"`
}

// pair is one key and value on the wire (JSON encodes bytes as base64: keys hold NUL bytes).
type pair struct {
	K []byte `json:"k"`
	V []byte `json:"v"`
}

// SocketPath is where the holder of the database in dir serves it (sockdir.go).
func SocketPath(dir string) (string, error) { return socketPath(dir) }

type server struct {
	http *http.Server
	path string
}

// serve starts serving db on its socket. Whoever holds the Badger lock owns the socket path, so a
// file left there by a holder that was killed is removed first.
func serve(db kv, dir string) (*server, error) {
	path, err := socketPath(dir)
	if err != nil {
		return nil, err
	}
	_ = os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	lis = ownUserOnly{lis}
	_ = os.Chmod(path, 0o600)
	info := HolderInfo{PID: os.Getpid(), Command: command(), Since: time.Now().UTC(), Dir: dir}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathHolder, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(info)
	})
	mux.HandleFunc("GET "+pathGet, func(w http.ResponseWriter, r *http.Request) {
		v, err := db.get(r.URL.Query().Get("key"))
		if errors.Is(err, ErrNotFound) {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(v)
	})
	mux.HandleFunc("GET "+pathScan, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		err := db.scan(q.Get("prefix"), q.Get("reverse") == "1", func(k, v []byte) (bool, error) {
			if err := enc.Encode(pair{K: k, V: v}); err != nil {
				return false, err // the reader stopped reading
			}
			return r.Context().Err() == nil, nil
		})
		if err != nil {
			// Headers are gone; a last line tells the reader the listing is incomplete.
			_ = enc.Encode(map[string]string{"error": err.Error()})
		}
	})
	mux.HandleFunc("POST "+pathPut, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			KVs []pair `json:"kvs"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		kvs := make(map[string][]byte, len(body.KVs))
		for _, p := range body.KVs {
			kvs[string(p.K)] = p.V
		}
		if err := db.put(kvs); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+pathBackup, func(w http.ResponseWriter, _ *http.Request) {
		// The status is sent before the first byte; a failure after it goes in a trailer.
		w.Header().Set("Trailer", trailerBackupError)
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := backup(db, w); err != nil {
			w.Header().Set(trailerBackupError, err.Error())
		}
	})
	srv := &server{http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, path: path}
	go func() { _ = srv.http.Serve(lis) }()
	return srv, nil
}

// close stops accepting, lets requests in flight finish (briefly), and removes the socket.
func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	_ = os.Remove(s.path)
}

func command() string {
	args := os.Args[1:]
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 3 {
			break
		}
		words = append(words, a)
	}
	return strings.TrimSpace("kbplatform " + strings.Join(words, " "))
}

// ownUserOnly accepts connections from this user's processes alone (checkPeer): the socket's mode
// keeps others out where it can be set, and this where it could not (a folder of the user's own
// choosing, another filesystem's rules).
type ownUserOnly struct{ net.Listener }

func (l ownUserOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if checkPeer(c, "a connection") == nil {
			return c, nil
		}
		c.Close()
	}
}
