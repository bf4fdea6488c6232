package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/store"
)

// withoutDir drops the database folder from a listing, so that two databases' listings compare.
func withoutDir(s string) string { return regexp.MustCompile(` in /\S+`).ReplaceAllString(s, "") }

// db check, backup and restore on a real database: a backup restored into a new folder lists the
// same records; a restore into a database that holds records is refused, and with --force backs
// those up first (the backup restores them).
func TestDBBackupAndRestore(t *testing.T) {
	env := isolated(t)
	seedStudies(t, env)
	out, errOut, code := run(t, env, "db", "check")
	if code != 0 || !strings.Contains(out, "ok ") || !strings.Contains(out, "evaluations") {
		t.Fatalf("db check: exit %d %s\n%s", code, errOut, out)
	}
	want, _, _ := run(t, env, "results", "list")
	if !strings.Contains(want, "evaluations") || strings.HasPrefix(want, "0 evaluations") {
		t.Fatalf("the seeded database lists nothing: the test would prove nothing:\n%s", want)
	}
	backup := filepath.Join(t.TempDir(), "kbp.bak")
	if _, errOut, code := run(t, env, "db", "backup", backup); code != 0 {
		t.Fatalf("db backup: exit %d %s", code, errOut)
	}

	other := isolated(t)
	out, errOut, code = run(t, other, "db", "restore", backup)
	if code != 0 || !strings.Contains(out, "restored") {
		t.Fatalf("restore into a new folder: exit %d %s\n%s", code, errOut, out)
	}
	if got, _, _ := run(t, other, "results", "list"); withoutDir(got) != withoutDir(want) {
		t.Errorf("the restored database lists\n%s\nwant\n%s", got, want)
	}

	_, errOut, code = run(t, other, "db", "restore", backup)
	if code == 0 || !strings.Contains(errOut, "not empty") || !strings.Contains(errOut, "Nothing was changed") {
		t.Errorf("restore into a database with records: exit %d %s", code, errOut)
	}
	empty := filepath.Join(t.TempDir(), "empty.bak")
	if _, errOut, code := run(t, isolated(t), "db", "backup", empty); code != 0 {
		t.Fatalf("backup of no database: exit %d %s", code, errOut)
	}
	out, errOut, code = run(t, other, "db", "restore", empty, "--force")
	if code != 0 {
		t.Fatalf("restore --force: exit %d %s", code, errOut)
	}
	m := regexp.MustCompile(`backed up to (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("restore --force does not say where the records it replaced went:\n%s", out)
	}
	if got, _, _ := run(t, other, "results", "list"); !strings.HasPrefix(got, "ID") || !strings.Contains(got, "\n0 evaluations") {
		t.Errorf("after restoring an empty backup: %s", got)
	}
	third := isolated(t)
	if _, errOut, code := run(t, third, "db", "restore", m[1]); code != 0 {
		t.Fatalf("restore the saved records: exit %d %s", code, errOut)
	}
	if got, _, _ := run(t, third, "results", "list"); withoutDir(got) != withoutDir(want) {
		t.Errorf("the records restore --force replaced came back as\n%s\nwant\n%s", got, want)
	}
}

// While another process holds the database, backup and check go through it, and restore refuses.
func TestDBCommandsWhileHeld(t *testing.T) {
	env := isolated(t)
	seedStudies(t, env)
	holder, err := store.Open(env["KBP_DB"])
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	out, errOut, code := run(t, env, "db", "check")
	if code != 0 || !strings.Contains(out, "held by") || !strings.Contains(out, "evaluations") {
		t.Errorf("db check while held: exit %d %s\n%s", code, errOut, out)
	}
	backup := filepath.Join(t.TempDir(), "held.bak")
	if _, errOut, code := run(t, env, "db", "backup", backup); code != 0 {
		t.Fatalf("db backup while held: exit %d %s", code, errOut)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Size() == 0 {
		t.Fatalf("backup through the holder: %v", err)
	}
	if _, errOut, code := run(t, env, "db", "restore", backup, "--force"); code == 0 || !strings.Contains(errOut, "holds it") {
		t.Errorf("restore while held: exit %d %s", code, errOut)
	}
	holder.Close()
	other := isolated(t)
	if _, errOut, code := run(t, other, "db", "restore", backup); code != 0 {
		t.Fatalf("restore the backup taken through the holder: exit %d %s", code, errOut)
	}
	want, _, _ := run(t, env, "results", "list")
	if got, _, _ := run(t, other, "results", "list"); withoutDir(got) != withoutDir(want) {
		t.Errorf("backup through the holder restored as\n%s\nwant\n%s", got, want)
	}
}
