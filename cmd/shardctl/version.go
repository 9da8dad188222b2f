package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/protocol"
)

// clientVersion is shardctl's version; it moves with shardd's (see
// cmd/shardd/main.go).
const clientVersion = "0.1.0-dev"

// versionInfo is what shardctl version prints.
type versionInfo struct {
	Client clientInfo  `json:"client"`
	Daemon *daemonInfo `json:"daemon,omitempty"`
	// DaemonError says why the daemon's version is missing (not running).
	DaemonError string `json:"daemon_error,omitempty"`
}

type clientInfo struct {
	Version         string `json:"version"`
	ProtocolVersion string `json:"protocol_version"`
	GoVersion       string `json:"go_version"`
	Revision        string `json:"revision,omitempty"`
}

type daemonInfo struct {
	Version         string `json:"version"`
	ProtocolVersion string `json:"protocol_version"`
}

func newVersionCommand(g *globalOptions) *cobra.Command {
	var out outputOptions
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print shardctl's version and the daemon's",
		Long: `Print shardctl's version and protocol version, and those the daemon says in
its hello. A daemon that is not running is reported, not an error (exit 0):
the client's version is still worth printing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			v := versionInfo{Client: clientInfo{Version: clientVersion, ProtocolVersion: protocol.Version, GoVersion: runtime.Version()}}
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v.Client.Revision = s.Value
					}
				}
			}
			conn, err := g.connect(cmd.Context())
			switch {
			case err == nil:
				h := conn.Hello()
				v.Daemon = &daemonInfo{Version: h.ServerVersion, ProtocolVersion: h.ProtocolVersion}
				conn.Close()
			case errors.Is(err, context.Canceled):
				return err
			default:
				v.DaemonError = err.Error()
			}
			out.human(&v)
			if out.structured() {
				return out.write(cmd.OutOrStdout(), v)
			}
			return writeVersion(cmd.OutOrStdout(), v)
		},
	}
	out.AddFlags(cmd.Flags())
	return cmd
}

func writeVersion(w io.Writer, v versionInfo) error {
	tw := newTable(w)
	client := fmt.Sprintf("%s (protocol %s, %s", v.Client.Version, v.Client.ProtocolVersion, v.Client.GoVersion)
	if v.Client.Revision != "" {
		client += ", " + v.Client.Revision[:min(12, len(v.Client.Revision))]
	}
	fmt.Fprintf(tw, "Client:\t%s)\n", client)
	if v.Daemon != nil {
		fmt.Fprintf(tw, "Daemon:\t%s (protocol %s)\n", orDash(v.Daemon.Version), orDash(v.Daemon.ProtocolVersion))
	} else {
		fmt.Fprintf(tw, "Daemon:\t- (%s)\n", v.DaemonError)
	}
	return tw.Flush()
}
