package main

import (
	"github.com/spf13/cobra"
)

func newCompletionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print the completion script of shardctl for a shell.

  bash:  source <(shardctl completion bash)
         or save it as /etc/bash_completion.d/shardctl
  zsh:   shardctl completion zsh > "${fpath[1]}/_shardctl"
  fish:  shardctl completion fish > ~/.config/fish/completions/shardctl.fish

Agent ids and job ids complete from the running daemon.`,
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, w := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			default:
				return root.GenFishCompletion(w, true)
			}
		},
	}
}
