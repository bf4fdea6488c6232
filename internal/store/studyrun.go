package store

import "time"

// pStudyRun keys the state of a study's latest run, one record per study.
const pStudyRun = "sr/"

// StudyRun is what a `study run` process says about itself while it works and when it stops, so
// that `study status` in another process can tell a running study from a stopped one.
type StudyRun struct {
	Study string `json:"study"`
	PID   int    `json:"pid"`
	Host  string `json:"host,omitempty"`
	// State is running, finished, stopped (interrupted or killed: see Updated) or
	// budget (the study's budget stopped new units).
	State   string    `json:"state"`
	Reason  string    `json:"reason,omitempty"`
	Started time.Time `json:"started"`
	// Updated is refreshed while the run lives: a running state not updated for long means the
	// process died without saying so (kill -9).
	Updated time.Time `json:"updated"`
	Total   int       `json:"total"`
	Done    int       `json:"done"`
	Failed  int       `json:"failed"`
	// Running lists the units in flight (arm label and task).
	Running []string `json:"running,omitempty"`
	// ETASeconds is the estimate of the time left, from finished units' durations (0: unknown).
	ETASeconds float64 `json:"eta_seconds,omitempty"`
}

// PutStudyRun replaces the study's run state.
func (s *Store) PutStudyRun(r StudyRun) error {
	b, err := encode("study-run", r)
	if err != nil {
		return err
	}
	return s.put(map[string][]byte{pStudyRun + r.Study: b})
}

// LastStudyRun returns the state of the study's latest run; ErrNotFound when it never ran with
// a kbplatform that records it.
func (s *Store) LastStudyRun(study string) (*StudyRun, error) {
	var r StudyRun
	if err := s.get(pStudyRun+study, "study-run", &r); err != nil {
		return nil, err
	}
	return &r, nil
}
