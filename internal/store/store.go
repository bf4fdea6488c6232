// Package store keeps kbplatform's records in Badger: tasks, kernels, evaluations, baselines.
//
// Every write is synced before it returns, so a record the CLI reports as stored survives a crash.
// One process holds the database (Badger takes an exclusive directory lock) and serves it on a
// local socket; every other kbplatform process reads and writes through that socket, so any
// command works while a study runs (docs/store-api.md).
package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/sdk"
)

// Errors.
var (
	ErrNotFound  = errors.New("not found")
	ErrLocked    = errors.New("database is in use by another kbplatform process")
	ErrAmbiguous = errors.New("ambiguous id")
)

// schema is the version of the record encoding.
const schema = 1

// Key prefixes.
const (
	pTask     = "t/"
	pKernel   = "k/"
	pEval     = "e/"
	pBaseline = "b/"
	ixTask    = "ix/task/"
	ixKernel  = "ix/kernel/"
	ixUnit    = "ix/unit/"
)

// Store is an open database: Badger itself in the process that holds it, that process's socket
// in every other (see Open).
type Store struct {
	mu  sync.Mutex
	kv  kv
	dir string
	srv *server // set while this process holds the database and serves it
	opt Options
}

// Dir is where the database lives.
func (s *Store) Dir() string { return s.dir }

// Close stops serving the database (when this process holds it) and closes it.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.srv != nil {
		s.srv.close()
		s.srv = nil
	}
	if s.kv != nil {
		err = s.kv.close()
		s.kv = nil
	}
	return err
}

type envelope struct {
	Schema int             `json:"schema"`
	Kind   string          `json:"kind"`
	Data   json.RawMessage `json:"data"`
}

func encode(kind string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(envelope{Schema: schema, Kind: kind, Data: b})
}

func decode(b []byte, kind string, v any) error {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("corrupt record: %w", err)
	}
	if env.Kind != kind {
		return fmt.Errorf("record is a %s, expected %s", env.Kind, kind)
	}
	if env.Schema > schema {
		return fmt.Errorf("record schema %d is newer than this kbplatform understands (%d)", env.Schema, schema)
	}
	return json.Unmarshal(env.Data, v)
}

func (s *Store) put(kvs map[string][]byte) error {
	if s.opt.ReadOnly {
		return ErrReadOnly // through the holder too: a reader never writes
	}
	return s.do(func(k kv) error { return k.put(kvs) })
}

func (s *Store) get(key, kind string, v any) error {
	return s.do(func(k kv) error {
		b, err := k.get(key)
		if err != nil {
			return err
		}
		return decode(b, kind, v)
	})
}

// scan visits keys with prefix in order (reverse: newest first for time-ordered keys).
func (s *Store) scan(prefix string, reverse bool, fn func(key, val []byte) (bool, error)) error {
	return s.do(func(k kv) error { return k.scan(prefix, reverse, fn) })
}

// NewID returns a time-ordered id: 12 hex digits of milliseconds, 8 random.
func NewID(t time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%012x%s", t.UnixMilli(), hex.EncodeToString(r[:]))
}

// ---- tasks -------------------------------------------------------------------------------------

// TaskRecord is a task the store knows (imported tasks live only here).
type TaskRecord struct {
	ID         string    `json:"id"`
	Origin     string    `json:"origin"`
	Path       string    `json:"path"`
	Source     string    `json:"source"`
	Hash       string    `json:"hash"`
	Meta       any       `json:"meta"`
	ImportedAt time.Time `json:"imported_at"`
}

// PutTasks stores task records in one transaction.
func (s *Store) PutTasks(recs []TaskRecord) error {
	for start := 0; start < len(recs); start += 500 {
		kvs := map[string][]byte{}
		for _, r := range recs[start:min(len(recs), start+500)] {
			b, err := encode("task", r)
			if err != nil {
				return err
			}
			kvs[pTask+r.ID] = b
		}
		if err := s.put(kvs); err != nil {
			return err
		}
	}
	return nil
}

// Tasks lists stored task records by id.
func (s *Store) Tasks() ([]TaskRecord, error) {
	var out []TaskRecord
	err := s.scan(pTask, false, func(_, v []byte) (bool, error) {
		var r TaskRecord
		if err := decode(v, "task", &r); err != nil {
			return false, err
		}
		out = append(out, r)
		return true, nil
	})
	return out, err
}

// ---- kernels -----------------------------------------------------------------------------------

// KernelRecord is a candidate source, content-addressed.
type KernelRecord struct {
	Hash      string    `json:"hash"`
	Source    string    `json:"source"`
	Name      string    `json:"name"`
	FirstSeen time.Time `json:"first_seen"`
}

// PutKernel stores a kernel unless its hash is already there.
func (s *Store) PutKernel(k KernelRecord) error {
	var old KernelRecord
	if err := s.get(pKernel+k.Hash, "kernel", &old); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	b, err := encode("kernel", k)
	if err != nil {
		return err
	}
	return s.put(map[string][]byte{pKernel + k.Hash: b})
}

// Kernel returns a stored kernel by hash or unique hash prefix.
func (s *Store) Kernel(hash string) (KernelRecord, error) {
	var k KernelRecord
	key, err := s.resolve(pKernel, hash)
	if err != nil {
		return k, err
	}
	return k, s.get(key, "kernel", &k)
}

// ---- evaluations -------------------------------------------------------------------------------

// Evaluation is a stored evaluation.
type Evaluation struct {
	ID       string           `json:"id"`
	Target   string           `json:"target"`   // the target plugin's name and the device: local/cpu
	Platform string           `json:"platform"` // fingerprint key
	StoredAt time.Time        `json:"stored_at"`
	Result   *contract.Result `json:"result"`
	Study    string           `json:"study,omitempty"`
	Model    string           `json:"model,omitempty"` // the study's model that wrote the kernel
	Arm      string           `json:"arm,omitempty"`   // the study's arm (AttemptRecord.Arm)
	// Issues are the backend's static-check findings on the kernel, when a backend checked it.
	Issues []sdk.Issue `json:"issues,omitempty"`
	// Blame says whose failure it was: kernel, or (verdict error) task, platform, environment.
	Blame string `json:"blame,omitempty"`
}

// UnitKey identifies what an evaluation measured: kernel × task × size × platform × contract.
func UnitKey(kernelHash, taskID, size, platform, contractVersion string) string {
	return strings.Join([]string{kernelHash, taskID, size, platform, contractVersion}, "|")
}

// PutEvaluation stores an evaluation and its indexes atomically; it assigns ID if empty.
func (s *Store) PutEvaluation(ev *Evaluation) error {
	if ev.Result == nil {
		return errors.New("evaluation without result")
	}
	if ev.ID == "" {
		ev.ID = NewID(time.Now())
	}
	if ev.StoredAt.IsZero() {
		ev.StoredAt = time.Now().UTC()
	}
	if ev.Platform == "" {
		ev.Platform = ev.Result.Fingerprint.Key()
	}
	b, err := encode("evaluation", ev)
	if err != nil {
		return err
	}
	r := ev.Result
	kvs := map[string][]byte{
		pEval + ev.ID:                             b,
		ixTask + r.Task.ID + "\x00" + ev.ID:       nil,
		ixKernel + r.Kernel.Hash + "\x00" + ev.ID: nil,
		ixUnit + UnitKey(r.Kernel.Hash, r.Task.ID, r.Task.Size, ev.Platform, r.Contract) + "\x00" + ev.ID: nil,
	}
	if ev.Study != "" {
		kvs[ixStudy+ev.Study+"\x00"+ev.ID] = nil
	}
	return s.put(kvs)
}

// Evaluation returns an evaluation by id or unique id prefix.
func (s *Store) Evaluation(id string) (*Evaluation, error) {
	key, err := s.resolve(pEval, id)
	if err != nil {
		return nil, err
	}
	var ev Evaluation
	if err := s.get(key, "evaluation", &ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// resolve turns an id prefix into a full key.
func (s *Store) resolve(prefix, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: empty id", ErrNotFound)
	}
	var keys []string
	err := s.scan(prefix+id, false, func(k, _ []byte) (bool, error) {
		keys = append(keys, string(k))
		return len(keys) < 2, nil
	})
	if err != nil {
		return "", err
	}
	switch len(keys) {
	case 0:
		return "", fmt.Errorf("%w: %s", ErrNotFound, id)
	case 1:
		return keys[0], nil
	}
	return "", fmt.Errorf("%w: %s matches more than one record", ErrAmbiguous, id)
}

// EvalFilter selects evaluations.
type EvalFilter struct {
	Task    string
	Kernel  string
	Verdict string
	Limit   int
}

// Evaluations lists evaluations, newest first.
func (s *Store) Evaluations(f EvalFilter) ([]*Evaluation, error) {
	var ids []string
	limit := f.Limit
	collect := func(prefix string) error {
		return s.scan(prefix, true, func(k, _ []byte) (bool, error) {
			i := bytes.IndexByte(k, 0)
			if i < 0 {
				return true, nil
			}
			ids = append(ids, string(k[i+1:]))
			return true, nil
		})
	}
	switch {
	case f.Task != "":
		if err := collect(ixTask + f.Task + "\x00"); err != nil {
			return nil, err
		}
	case f.Kernel != "":
		full, err := s.Kernel(f.Kernel)
		if err != nil {
			return nil, err
		}
		if err := collect(ixKernel + full.Hash + "\x00"); err != nil {
			return nil, err
		}
	default:
		err := s.scan(pEval, true, func(k, _ []byte) (bool, error) {
			ids = append(ids, strings.TrimPrefix(string(k), pEval))
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ids)))
	var out []*Evaluation
	for _, id := range ids {
		var ev Evaluation
		if err := s.get(pEval+id, "evaluation", &ev); err != nil {
			return nil, err
		}
		if f.Kernel != "" && !strings.HasPrefix(ev.Result.Kernel.Hash, f.Kernel) {
			continue
		}
		if f.Verdict != "" && ev.Result.Verdict != f.Verdict && ev.Result.ErrorClass != f.Verdict {
			continue
		}
		out = append(out, &ev)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

// HasUnit reports whether an evaluation of this unit exists (for resumable studies).
func (s *Store) HasUnit(unit string) (bool, error) {
	found := false
	err := s.scan(ixUnit+unit+"\x00", false, func(_, _ []byte) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

// ---- baselines ---------------------------------------------------------------------------------

// Baseline is a timing of the task's own Model in one execution mode on one platform.
type Baseline struct {
	TaskID      string               `json:"task_id"`
	TaskHash    string               `json:"task_hash"`
	Size        string               `json:"size"`
	Mode        string               `json:"mode"`
	Device      string               `json:"device"`
	Platform    string               `json:"platform"`
	Fingerprint contract.Fingerprint `json:"fingerprint"`
	Stats       *contract.Stats      `json:"stats,omitempty"`
	Eager       *contract.Stats      `json:"eager,omitempty"`     // eager timed in the same run
	Speedup     float64              `json:"speedup,omitempty"`   // eager median / this mode's median
	CompileS    float64              `json:"compile_s,omitempty"` // torch.compile's first call, untimed
	Verdict     string               `json:"verdict"`
	Error       string               `json:"error,omitempty"`
	Contract    string               `json:"contract,omitempty"` // how it was timed (kbp-contract/N)
	Evaluation  string               `json:"evaluation,omitempty"`
	MeasuredAt  time.Time            `json:"measured_at"`
	// Unresolved says why the timed calls did not pin Speedup down (the evaluation's
	// timing_unresolved flag); empty when they did.
	Unresolved string `json:"unresolved,omitempty"`
	// Shared names the program outside kbplatform that held the GPU while it was timed (the
	// evaluation's gpu_shared flag), or why a CPU timing could not take its turn at the CPUs
	// (cpu_shared); empty when neither.
	Shared string `json:"gpu_shared,omitempty"`
}

func baselineKey(b Baseline) string {
	return pBaseline + strings.Join([]string{b.TaskID, b.Size, b.Platform, b.Mode}, "|")
}

// PutBaseline stores (replaces) a baseline.
func (s *Store) PutBaseline(b Baseline) error {
	v, err := encode("baseline", b)
	if err != nil {
		return err
	}
	return s.put(map[string][]byte{baselineKey(b): v})
}

// Baselines lists baselines, optionally for one task.
func (s *Store) Baselines(task string) ([]Baseline, error) {
	prefix := pBaseline
	if task != "" {
		prefix += task + "|"
	}
	var out []Baseline
	err := s.scan(prefix, false, func(_, v []byte) (bool, error) {
		var b Baseline
		if err := decode(v, "baseline", &b); err != nil {
			return false, err
		}
		out = append(out, b)
		return true, nil
	})
	return out, err
}

// ---- studies -----------------------------------------------------------------------------------

const (
	pStudy   = "s/"
	pUnit    = "su/"
	pAttempt = "sa/"
	ixStudy  = "ix/study/"
)

// Study is a stored study: its spec (tasks × plugins × budget) under a deterministic id.
type Study struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Spec      json.RawMessage `json:"spec"`
	CreatedAt time.Time       `json:"created_at"`
}

// Unit is one finished strategy run of a study: one arm (model × backend × strategy × target ×
// seed) on one task.
type Unit struct {
	Study string `json:"study"`
	// Task is the unit's key within the study (UnitDone, PutUnit): the arm's key and the task id
	// in a study of arms, the task id (or "task @ model") in studies stored before arms.
	Task           string    `json:"task"`
	Attempts       int       `json:"attempts"`
	BestEvaluation string    `json:"best_evaluation,omitempty"`
	Note           string    `json:"note,omitempty"`
	FinishedAt     time.Time `json:"finished_at"`
	// The arm and task the unit ran, as AttemptRecord names them; TaskID is the task's id.
	TaskID   string `json:"task_id,omitempty"`
	Arm      string `json:"arm,omitempty"`
	Model    string `json:"model,omitempty"`
	Backend  string `json:"backend,omitempty"`
	Strategy string `json:"strategy,omitempty"`
	Target   string `json:"target,omitempty"`
	Seed     int64  `json:"seed,omitempty"`
	// StartedAt and FinishedAt bound the run: a study's wall-time budget counts their union.
	StartedAt time.Time `json:"started_at,omitzero"`
	// Spent is what the run used: model calls, tokens, dollars, evaluations.
	Generations int     `json:"generations,omitempty"`
	Evaluations int     `json:"evaluations,omitempty"`
	Tokens      int64   `json:"tokens,omitempty"`
	CostUSD     float64 `json:"cost_usd,omitempty"`
}

// AttemptRecord is one step of a strategy's search.
type AttemptRecord struct {
	ID    string `json:"id"`
	Study string `json:"study"`
	Task  string `json:"task"`
	Model string `json:"model,omitempty"` // the study's model behind the attempt
	// The rest of the attempt's arm (one model × backend × strategy × target × seed of a study):
	// Arm is its key, the others its parts, so reports group attempts without reading the spec.
	Arm      string `json:"arm,omitempty"`
	Backend  string `json:"backend,omitempty"`
	Strategy string `json:"strategy,omitempty"`
	Target   string `json:"target,omitempty"`
	Seed     int64  `json:"seed,omitempty"`
	sdk.Attempt
	At time.Time `json:"at"`
}

// PutStudy stores a study (idempotent: an existing id keeps its creation time).
func (s *Store) PutStudy(st Study) error {
	var old Study
	if err := s.get(pStudy+st.ID, "study", &old); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	b, err := encode("study", st)
	if err != nil {
		return err
	}
	return s.put(map[string][]byte{pStudy + st.ID: b})
}

// Study returns a study by id or unique prefix.
func (s *Store) Study(id string) (*Study, error) {
	key, err := s.resolve(pStudy, id)
	if err != nil {
		return nil, err
	}
	var st Study
	return &st, s.get(key, "study", &st)
}

// Studies lists studies by id.
func (s *Store) Studies() ([]Study, error) {
	var out []Study
	err := s.scan(pStudy, false, func(_, v []byte) (bool, error) {
		var st Study
		if err := decode(v, "study", &st); err != nil {
			return false, err
		}
		out = append(out, st)
		return true, nil
	})
	return out, err
}

// PutUnit marks a task of a study done.
func (s *Store) PutUnit(u Unit) error {
	b, err := encode("unit", u)
	if err != nil {
		return err
	}
	return s.put(map[string][]byte{pUnit + u.Study + "\x00" + u.Task: b})
}

// UnitDone reports whether the task of the study finished before.
func (s *Store) UnitDone(study, task string) (bool, error) {
	var u Unit
	err := s.get(pUnit+study+"\x00"+task, "unit", &u)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Units lists a study's finished tasks.
func (s *Store) Units(study string) ([]Unit, error) {
	var out []Unit
	err := s.scan(pUnit+study+"\x00", false, func(_, v []byte) (bool, error) {
		var u Unit
		if err := decode(v, "unit", &u); err != nil {
			return false, err
		}
		out = append(out, u)
		return true, nil
	})
	return out, err
}

// PutAttempt stores one attempt of a study's task.
func (s *Store) PutAttempt(a *AttemptRecord) error {
	if a.ID == "" {
		a.ID = NewID(time.Now())
	}
	if a.At.IsZero() {
		a.At = time.Now().UTC()
	}
	b, err := encode("attempt", a)
	if err != nil {
		return err
	}
	return s.put(map[string][]byte{pAttempt + a.Study + "\x00" + a.Task + "\x00" + a.ID: b})
}

// Attempts lists the attempts of a study (one task when task is not empty), oldest first.
func (s *Store) Attempts(study, task string) ([]AttemptRecord, error) {
	prefix := pAttempt + study + "\x00"
	if task != "" {
		prefix += task + "\x00"
	}
	var out []AttemptRecord
	err := s.scan(prefix, false, func(_, v []byte) (bool, error) {
		var a AttemptRecord
		if err := decode(v, "attempt", &a); err != nil {
			return false, err
		}
		out = append(out, a)
		return true, nil
	})
	return out, err
}

// StudyEvaluations lists the evaluations a study made, oldest first.
func (s *Store) StudyEvaluations(study string) ([]*Evaluation, error) {
	var ids []string
	err := s.scan(ixStudy+study+"\x00", false, func(k, _ []byte) (bool, error) {
		i := bytes.LastIndexByte(k, 0)
		ids = append(ids, string(k[i+1:]))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Evaluation, 0, len(ids))
	for _, id := range ids {
		var ev Evaluation
		if err := s.get(pEval+id, "evaluation", &ev); err != nil {
			return nil, err
		}
		out = append(out, &ev)
	}
	return out, nil
}
