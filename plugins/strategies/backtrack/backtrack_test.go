package backtrack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
	"github.com/kbplatform/kbplatform/plugins/strategies/internal/strategytest"
	"github.com/kbplatform/kbplatform/sdk"
)

// The server's second kernel breaks the first; the third request must say so, carry the good
// kernel again and come at a higher temperature, and the server then answers with a better one.
func TestRegressionGoesBackHotter(t *testing.T) {
	var temps []any
	p, srv := strategytest.New(t, func(n int, body map[string]any, user string, w http.ResponseWriter) {
		temps = append(temps, body["temperature"])
		switch {
		case n == 1:
			openaitest.Completion(w, nil, strategytest.Kernel("good"))
		case n == 2:
			openaitest.Completion(w, nil, strategytest.Kernel("broken"))
		case strings.Contains(user, "Your attempt of turn 1 did worse") && strings.Contains(user, "12.5% of elements wrong") &&
			strings.Contains(user, "# good") && !strings.Contains(user, "# broken"):
			openaitest.Completion(w, nil, strategytest.Kernel("better"))
		default:
			openaitest.Completion(w, nil, strategytest.Kernel("lost"))
		}
	}, func(src string) *sdk.Result {
		switch {
		case strategytest.Marked(src, "good"):
			return strategytest.Pass(1.5, "k1")
		case strategytest.Marked(src, "better"):
			return strategytest.Pass(3, "k2")
		}
		return strategytest.Mismatch()
	})
	res := strategytest.Run(t, New(), `{"turns": 3, "temperature": 0.1, "temperature_step": 0.3}`, p)
	if srv.Requests() != 3 || res.BestEvaluation != "eval-3" {
		t.Fatalf("%d requests, result %+v", srv.Requests(), res)
	}
	if len(temps) != 3 || temps[0] != 0.1 || temps[1] != 0.1 || temps[2] != 0.4 {
		t.Errorf("temperatures %v, want 0.1 0.1 0.4", temps)
	}
	if a := p.Attempts[2]; a.ParentStep != 0 || a.Temperature != 0.4 || a.FeedbackKind != "raw G+E" {
		t.Errorf("attempt 2: parent %d temperature %g kind %q", a.ParentStep, a.Temperature, a.FeedbackKind)
	}
}

func TestSettings(t *testing.T) {
	for _, c := range []struct {
		settings string
		ok       bool
	}{
		{`{}`, true},
		{`{"turns": 6, "format": "contrastive", "feedback": "G+E+P", "temperature": 0.2, "temperature_step": 0.1, "max_temperature": 1.2}`, true},
		{`{"temperature": 0.8, "max_temperature": 0.5}`, false},
		{`{"temperature_step": 0}`, false},
		{`{"temperature_step": -0.1}`, false},
		{`{"max_temperature": 3}`, false},
		{`{"temprature_step": 0.1}`, false},
	} {
		err := New().Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(c.settings)})
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, sdk.ErrInvalidConfig)) {
			t.Errorf("%s: %v", c.settings, err)
		}
	}
}
