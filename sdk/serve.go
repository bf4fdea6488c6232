package sdk

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Logger returns a logger whose lines the host picks up from the plugin's stderr and logs as its
// own (with the plugin's name). Use it instead of printing.
func Logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Debug, JSONFormat: true})
}

// Serve runs impl as a plugin process and returns when the host is done with it. Call it from the
// plugin binary's main. Run outside a host, it prints how it is meant to be used and exits 1.
func Serve(impl Plugin) {
	if os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		info := impl.Info()
		fmt.Fprintf(os.Stderr, "%s is a kbplatform %s plugin (%s %s); kbplatform starts it, it is not run by hand.\n"+
			"Install: put the binary on the plugin path and run `kbplatform plugins lock`.\n", os.Args[0], info.Kind, info.Name, info.Version)
		os.Exit(1)
	}
	plugin.Serve(ServeConfig(impl))
}

// ServeConfig is the go-plugin configuration Serve uses (for tests and custom mains).
func ServeConfig(impl Plugin) *plugin.ServeConfig {
	return &plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginKey: &GRPCPlugin{Impl: impl}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, ServerOptions()...)...)
		},
		Logger: Logger(),
	}
}
