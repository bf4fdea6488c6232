package gateway

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
)

// What the gateway adds to a call: a request sent through the plugin to a local server (recorded
// and cached), and the same request answered from the cache (recorded).
func BenchmarkGateway(b *testing.B) {
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			f := newFixture(b, func(_ int, _ map[string]any, w http.ResponseWriter) {
				openaitest.Completion(w, nil, "```python\nclass ModelNew: pass\n```")
			})
			g := f.gateway(b, Options{NoCache: !cached}, nil)
			ctx := context.Background()
			req := ask("relu", 1)
			if _, err := g.Generate(ctx, Call{Study: "warm", Task: "t"}, req); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// The first sample of the request every time: cached after the warm-up.
				if _, err := g.Generate(ctx, Call{Study: "warm", Task: "t"}, req); err != nil {
					b.Fatal(err)
				}
				g.mu.Lock()
				clear(g.samples)
				g.mu.Unlock()
			}
		})
	}
}
