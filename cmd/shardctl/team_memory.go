package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// teamMemoryOptions are the options of shardctl team memory (the list).
type teamMemoryOptions struct {
	g      *globalOptions
	output outputOptions
	scope  string
}

// AddFlags registers the team memory flags on cmd.
func (o *teamMemoryOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.scope, "scope", "", `only one scope: "shared" or an agent id (default every scope)`)
}

func newTeamMemoryCommand(g *globalOptions) *cobra.Command {
	o := &teamMemoryOptions{g: g}
	long := `The team's memory: markdown notes every agent of the team reads, shared
(scope "shared") or one agent's (scope = its id); a key is unique in its
scope, and putting it again replaces the note.

"team memory" (or "team memory ls") lists the notes (team.memory.list):
ID, SCOPE, KEY, TITLE, AUTHOR, UPDATED and the body's first line; --scope
keeps one scope. -o json|yaml prints {"entries":[TeamMemoryEntry]} with the
bodies whole.`
	cmd := &cobra.Command{
		Use:   "memory [--scope SCOPE]",
		Short: "List, write and remove the team's memory notes",
		Long:  long,
		Args:  cobra.NoArgs,
		RunE:  o.run,
	}
	o.AddFlags(cmd)
	lo := &teamMemoryOptions{g: g}
	ls := &cobra.Command{
		Use:     "ls [--scope SCOPE]",
		Aliases: []string{"list"},
		Short:   "List the team's memory notes",
		Long:    long,
		Args:    cobra.NoArgs,
		RunE:    lo.run,
	}
	lo.AddFlags(ls)
	cmd.AddCommand(ls, newTeamMemoryPutCommand(g), newTeamMemoryRmCommand(g))
	return cmd
}

func (o *teamMemoryOptions) run(cmd *cobra.Command, _ []string) error {
	if err := o.output.validate(); err != nil {
		return err
	}
	return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
		es, err := listMemory(ctx, conn, o.scope)
		if err != nil {
			return err
		}
		if es == nil {
			es = []protocol.TeamMemoryEntry{}
		}
		if o.output.structured() {
			return o.output.write(cmd.OutOrStdout(), protocol.TeamMemoryListData{Entries: es})
		}
		for i := range es {
			es[i].Body = firstLine(es[i].Body)
		}
		safeAll(&es)
		if len(es) == 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "No memory notes.")
			return nil
		}
		return o.print(cmd.OutOrStdout(), es)
	})
}

func (o *teamMemoryOptions) print(w io.Writer, es []protocol.TeamMemoryEntry) error {
	st := o.output.style(o.g)
	var all, agents []string
	for _, e := range es {
		all = append(all, e.MemoryID)
		agents = append(agents, e.Author)
		if e.Scope != protocol.MemoryScopeShared {
			agents = append(agents, e.Scope)
		}
	}
	idf := newTeamIDs(st.wide, all)
	st.shorten(agents)
	width := termWidth(w)
	if st.wide {
		width = 0
	}
	tw := newTableNoHeader(w, st.noHeaders)
	fmt.Fprintln(tw, "ID\tSCOPE\tKEY\tTITLE\tAUTHOR\tUPDATED\tBODY")
	for _, e := range es {
		scope := e.Scope
		if scope != protocol.MemoryScopeShared {
			scope = st.agent(scope)
		}
		author := "you"
		if e.Author != "" {
			author = st.agent(e.Author)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", idf.id(e.MemoryID), scope, e.Key, orDash(fit(e.Title, 30, width)),
			author, st.when(o.g.clock, e.Updated), orDash(fit(e.Body, 50, width)))
	}
	return tw.Flush()
}

// teamMemoryPutOptions are the options of shardctl team memory put.
type teamMemoryPutOptions struct {
	g      *globalOptions
	output outputOptions
	scope  string
	title  string
	body   string
	file   string
}

// AddFlags registers the team memory put flags on cmd.
func (o *teamMemoryPutOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.scope, "scope", protocol.MemoryScopeShared, `"shared", or an agent (id, name or unique prefix) whose own note it is`)
	fs.StringVar(&o.title, "title", "", "the note's title")
	fs.StringVar(&o.body, "body", "", "the note's markdown body")
	fs.StringVarP(&o.file, "file", "f", "", "read the body from FILE (- for stdin)")
}

func newTeamMemoryPutCommand(g *globalOptions) *cobra.Command {
	o := &teamMemoryPutOptions{g: g}
	cmd := &cobra.Command{
		Use:   "put KEY (--body TEXT | --file FILE) [--scope SCOPE] [--title TITLE]",
		Short: "Write a memory note (created, or replaced)",
		Long: `Write the note of KEY in its scope (team.memory.put): created, or replaced
when the key exists. The body is --body, or the contents of --file (- reads
stdin). Written by you (no author). Prints the note's id; -o json|yaml
prints {"entry": TeamMemoryEntry}.`,
		Example: `  shardctl team memory put style --body "Tabs, not spaces."
  shardctl team memory put api --title "API notes" --file notes.md`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if o.body != "" && o.file != "" {
				return usageErrorf("give --body or --file, not both")
			}
			body := o.body
			if o.file != "" {
				b, err := textOrFile(nil, o.file, "--file", cmd.InOrStdin())
				if err != nil {
					return err
				}
				body = b
			}
			if body == "" {
				return usageErrorf("no body: give --body or --file")
			}
			msg := &protocol.TeamMemoryPut{Header: teamHeader(protocol.TypeTeamMemoryPut), Scope: o.scope, Key: args[0], Title: o.title, Body: body}
			if err := msg.Validate(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				if msg.Scope != protocol.MemoryScopeShared {
					scope, err := resolveAgent(ctx, conn, msg.Scope)
					if err != nil {
						return err
					}
					msg.Scope = scope
				}
				var data protocol.TeamMemoryData
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				o.output.human(&data)
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), data.Entry.MemoryID)
				return err
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func newTeamMemoryRmCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "rm MEMORY_ID",
		Aliases: []string{"delete", "remove"},
		Short:   "Remove a memory note",
		Long:    `Remove one memory note (team.memory.delete) and print its id.`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				id, err := resolveTeamID(ctx, conn, ids.Memory, args[0])
				if err != nil {
					return err
				}
				if err := conn.Call(ctx, &protocol.TeamMemoryDelete{Header: teamHeader(protocol.TypeTeamMemoryDelete), MemoryID: id}, nil); err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), id)
				return err
			})
		},
	}
	cmd.ValidArgsFunction = completeTeam(g, ids.Memory)
	return cmd
}
