package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// folderState names every file of dir with its size and modification time: what a read command
// must leave as it was.
func folderState(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %d %d", e.Name(), fi.Size(), fi.ModTime().UnixNano()))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// readCommands are commands that only read the database.
var readCommands = [][]string{
	{"results", "list"},
	{"results", "cost"},
	{"study", "list"},
	{"study", "show", "studyaaa"},
	{"study", "status", "studyaaa"},
	{"study", "report", "studyaaa"},
	{"tasks", "list"},
}

// Read commands open the database read-only: they change no file of it (no LOCK, no new log, no
// compaction), and on a database that does not exist yet they create nothing.
func TestReadCommandsChangeNothing(t *testing.T) {
	env := isolated(t)
	for _, args := range readCommands {
		if _, errOut, code := run(t, env, args...); code != 0 && !strings.Contains(errOut, "not found") {
			t.Errorf("%v on no database: exit %d: %s", args, code, errOut)
		}
	}
	if _, err := os.Stat(env["KBP_DB"]); !os.IsNotExist(err) {
		t.Fatalf("a read command created the database folder (%v)", err)
	}
	seedStudies(t, env)
	before := folderState(t, env["KBP_DB"])
	for _, args := range readCommands {
		if _, errOut, code := run(t, env, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
	if after := folderState(t, env["KBP_DB"]); after != before {
		t.Errorf("read commands changed the database folder:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// openToAll lets every user reach path: t.TempDir's folders are 0700.
func openToAll(t *testing.T, path string) {
	t.Helper()
	for p := path; p != "/" && p != filepath.Clean(os.TempDir()); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A database folder the user may not write (a shared result set) can be listed; Badger used to
// stop at "Cannot write pid file .../LOCK". Root may write anywhere, so under root the command
// runs as uid 65534.
func TestReadOnlyFolderIsListed(t *testing.T) {
	env := isolated(t)
	seedStudies(t, env)
	db := env["KBP_DB"]
	bin := buildKbplatform(t)
	openToAll(t, filepath.Dir(bin))
	openToAll(t, db)
	home := t.TempDir()
	openToAll(t, home)
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}
	env["HOME"] = home
	env["KBP_WORK_DIR"] = filepath.Join(home, "work")
	env["KBP_CACHE_DIR"] = filepath.Join(home, "cache")
	ents, _ := os.ReadDir(db)
	for _, e := range ents {
		if err := os.Chmod(filepath.Join(db, e.Name()), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(db, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(db, 0o755) })
	before := folderState(t, db)
	r := binaryRunner{t: t, bin: bin, env: env}
	for _, args := range [][]string{{"results", "list"}, {"study", "show", "studyaaa"}} {
		cmd := r.command(args...)
		if os.Getuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Errorf("%v on a read-only folder: %v\n%s", args, err, errOut.String())
		}
		if args[0] == "results" && !strings.Contains(out.String(), "evaluations") {
			t.Errorf("results list printed no listing:\n%s", out.String())
		}
	}
	if after := folderState(t, db); after != before {
		t.Errorf("the read-only folder changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// A damaged table gives a clear error naming the file and what to do: never a Go panic with a
// stack trace (a table cut short), never "not found" or a listing without its records (a table of
// zeros), and the file stays as it was. The real binary runs, so that a crash shows as one.
func TestDamagedTableIsAClearError(t *testing.T) {
	bin := buildKbplatform(t)
	for _, damage := range []string{"truncated", "zeroed"} {
		t.Run(damage, func(t *testing.T) {
			env := isolated(t)
			seedStudies(t, env)
			tables, _ := filepath.Glob(filepath.Join(env["KBP_DB"], "*.sst"))
			if len(tables) == 0 {
				t.Fatal("no table was written: the test would prove nothing")
			}
			good, err := os.ReadFile(tables[0])
			if err != nil {
				t.Fatal(err)
			}
			bad := good[:len(good)/3]
			if damage == "zeroed" {
				bad = make([]byte, len(good))
			}
			if err := os.WriteFile(tables[0], bad, 0o600); err != nil {
				t.Fatal(err)
			}
			r := binaryRunner{t: t, bin: bin, env: env}
			for _, args := range [][]string{{"results", "list"}, {"study", "show", "studyaaa"}, {"db", "check"}} {
				out, errOut, code := r.run(args...)
				if code == 0 {
					t.Errorf("%v: exit 0 on a damaged table:\n%s", args, out)
				}
				for _, bad := range []string{"goroutine ", "panic", "not found"} {
					if strings.Contains(errOut, bad) {
						t.Errorf("%v: %q in its error:\n%s", args, bad, errOut)
					}
				}
				if !strings.Contains(out+errOut, filepath.Base(tables[0])) || !strings.Contains(out+errOut, "db restore") {
					t.Errorf("%v: the error does not name the table or say what to do:\n%s%s", args, out, errOut)
				}
			}
			if got, _ := os.ReadFile(tables[0]); !bytes.Equal(got, bad) {
				t.Errorf("the damaged table was changed")
			}
		})
	}
}
