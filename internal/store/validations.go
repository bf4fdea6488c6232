package store

import (
	"strings"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// pValidation keys the stored task validations: task, size and device.
const pValidation = "tv/"

// ValidationRecord is what `tasks validate` found about a task's reference on a device: whether
// it is usable, and which of the probed distributions (negated, uniform, small) the contract adds a
// trial under, with the reason for each refused one. It is kept with the task so that `tasks show`
// can say it without running anything; an evaluation probes again for itself.
type ValidationRecord struct {
	TaskID      string         `json:"task_id"`
	TaskHash    string         `json:"task_hash"` // the rendered source validated: a changed task is validated again
	Size        string         `json:"size"`
	Device      string         `json:"device"`
	Platform    string         `json:"platform,omitempty"`
	ValidatedAt time.Time      `json:"validated_at"`
	Validation  sdk.Validation `json:"validation"`
}

func validationKey(v ValidationRecord) string {
	return pValidation + strings.Join([]string{v.TaskID, v.Size, v.Device}, "|")
}

// PutValidation stores (replaces) the validation of a task at a size on a device.
func (s *Store) PutValidation(v ValidationRecord) error {
	b, err := encode("validation", v)
	if err != nil {
		return err
	}
	return s.put(map[string][]byte{validationKey(v): b})
}

// Validations lists the stored validations of a task (every size and device), or of every task
// when task is "".
func (s *Store) Validations(task string) ([]ValidationRecord, error) {
	prefix := pValidation
	if task != "" {
		prefix += task + "|"
	}
	var out []ValidationRecord
	err := s.scan(prefix, false, func(_, b []byte) (bool, error) {
		var v ValidationRecord
		if err := decode(b, "validation", &v); err != nil {
			return false, err
		}
		out = append(out, v)
		return true, nil
	})
	return out, err
}
