package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// teamSubmitOptions are the options of shardctl team submit.
type teamSubmitOptions struct {
	g         *globalOptions
	output    outputOptions
	cwd       string
	costLimit float64
	runtime   string
	provider  string
	model     string
	file      string
	requestID string
}

// AddFlags registers the team submit flags on cmd.
func (o *teamSubmitOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.cwd, "cwd", "", "the repository's main checkout the team works in (default the current directory)")
	fs.Float64Var(&o.costLimit, "cost-limit", 0, "the most the goal may spend, in US dollars (default no limit)")
	fs.StringVar(&o.runtime, "runtime", "", "runtime profile the lead runs on (default the daemon's)")
	fs.StringVar(&o.provider, "provider", "", "provider the lead runs on, one of shardctl models (default the daemon's)")
	fs.StringVar(&o.model, "model", "", "model of the lead (default the daemon's)")
	fs.StringVarP(&o.file, "file", "f", "", "read the goal from FILE (- for stdin) instead of the arguments")
	fs.StringVar(&o.requestID, "request-id", "", "an id of this submission: a retried submit with the same id answers the goal it created")
}

func newTeamSubmitCommand(g *globalOptions) *cobra.Command {
	o := &teamSubmitOptions{g: g}
	cmd := &cobra.Command{
		Use:   "submit TEXT... | --file FILE",
		Short: "Give the team a goal",
		Long: `Give the team a goal (team.goal.submit) and print the goal's id. The daemon
commits the goal (planning) and hands it to the lead of the repository —
the lead of the last goal in the same checkout while that agent exists,
otherwise a new one — which plans it as tasks; the command does not wait for
the plan ("shardctl team show GOAL" or "shardctl team watch GOAL" follows
it).

The goal is the arguments joined by spaces, or the contents of --file
(- reads stdin). --cwd must be in a git repository (else INVALID_REQUEST,
not_a_repository). -o json|yaml prints {"goal": TeamGoal}.`,
		Example: `  shardctl team submit "add a --version flag; split the work"
  shardctl team submit --file goal.md --cost-limit 5
  printf "Two files.\n- a: sim: say a\n- b: sim: say b (after 1)\n" | shardctl team submit -f -`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := o.message(cmd, args)
			if err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.TeamGoalData
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), data.Goal.GoalID)
				return err
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// message builds and checks the team.goal.submit command; problems with
// the arguments and flags are usage errors.
func (o *teamSubmitOptions) message(cmd *cobra.Command, args []string) (*protocol.TeamGoalSubmit, error) {
	if err := o.output.validate(); err != nil {
		return nil, err
	}
	text, err := textOrFile(args, o.file, "--file", cmd.InOrStdin())
	if err != nil {
		return nil, err
	}
	abs, err := absCwd(o.cwd)
	if err != nil {
		return nil, err
	}
	msg := &protocol.TeamGoalSubmit{
		Header: teamHeader(protocol.TypeTeamGoalSubmit), Text: text, Cwd: abs,
		Runtime: o.runtime, Provider: o.provider, Model: o.model, RequestID: o.requestID,
	}
	if cmd.Flags().Changed("cost-limit") {
		limit := o.costLimit
		msg.CostLimitUSD = &limit
	}
	if err := msg.Validate(); err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	return msg, nil
}

// textOrFile is a command's text: its arguments joined by spaces, or the
// contents of file ("-": stdin), never both; flag names the file flag in
// messages. Empty text is a usage error.
func textOrFile(args []string, file, flag string, stdin io.Reader) (string, error) {
	var text string
	switch {
	case file != "" && len(args) > 0:
		return "", usageErrorf("give the text as arguments or with %s, not both", flag)
	case file == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", fmt.Errorf("read stdin: %w", err)
		}
		text = string(b)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usageErrorf("%s: %w", flag, err)
		}
		text = string(b)
	default:
		text = strings.Join(args, " ")
	}
	if strings.TrimSpace(text) == "" {
		return "", usageErrorf("no text: give it as arguments or with %s", flag)
	}
	return text, nil
}
