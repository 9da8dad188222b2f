package main

import "github.com/spf13/cobra"

func newWebCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Enroll browsers and manage their sessions",
		Long: `Enroll browsers for the web listener and manage their sessions: the
cookies that keep an enrolled browser signed in.

A browser is enrolled with a one-time link from "shardctl web enroll"; the
daemon then keeps only a hash of its session cookie. These commands work
over the unix socket only: a browser session can never enroll another
browser or revoke anything.`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(
		newWebEnrollCommand(g),
		newWebSessionsCommand(g),
	)
	return cmd
}
