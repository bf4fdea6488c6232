// Command kbplatform evaluates LLM-written kernels against PyTorch.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kbplatform/kbplatform/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
