package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// teamAnswerOptions are the options of shardctl team answer.
type teamAnswerOptions struct {
	g      *globalOptions
	output outputOptions
	text   string
}

// AddFlags registers the team answer flags on cmd.
func (o *teamAnswerOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&o.text, "text", "t", "", `words sent with the answer: the feedback of "Request changes", a reason for "Deny", a question's answer`)
}

func newTeamAnswerCommand(g *globalOptions) *cobra.Command {
	o := &teamAnswerOptions{g: g}
	cmd := &cobra.Command{
		Use:   "answer DECISION [OPTION] [--text TEXT]",
		Short: "Answer a decision: an option's label or number, and words",
		Long: `Answer an open decision (team.decision.answer). OPTION is one of its
options' labels (case does not matter) or its number, from 1, as "team
decisions" and "team show" list them: a merge decision offers Merge,
Request changes (--text is the feedback the worker gets) and Reject; a
permission Allow once, Always allow for this agent and Deny; a question its
own options, or none — then the answer is the text, given as OPTION or with
--text.

Without OPTION (on a decision that has options) the decision is printed —
question, context, options numbered — and the command exits 2.

The first answer wins, from any client: a decision no longer open is
CONFLICT (exit 1). A merge the daemon refuses (a conflict, a dirty main
checkout) leaves the decision open again: the reason is printed and the
command exits 1. Prints the decision's id, state and answer;
-o json|yaml prints {"decision": TeamDecision}.`,
		Example: `  shardctl team answer decision-01j9z7k3 Merge
  shardctl team answer decision-01j9z7k3 "Request changes" --text "use a constant"
  shardctl team answer decision-01j9z7k3 3`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	cmd.ValidArgsFunction = func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return completeTeam(g, ids.Decision)(c, args, s)
		case 1:
			return askForCompletion(c, g, func(ctx context.Context, conn *client.Conn) []string {
				ds, _ := listDecisions(ctx, conn, "", true)
				id, err := matchTeamID(ids.Decision, args[0], decisionIDs(ds))
				if err != nil {
					return nil
				}
				if i := slices.IndexFunc(ds, func(d protocol.TeamDecision) bool { return d.DecisionID == id }); i >= 0 {
					return ds[i].Options
				}
				return nil
			}), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	o.AddFlags(cmd)
	return cmd
}

// decisionIDs lists the ids of ds.
func decisionIDs(ds []protocol.TeamDecision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.DecisionID
	}
	return out
}

func (o *teamAnswerOptions) run(ctx context.Context, conn *client.Conn, args []string, stdout, stderr io.Writer) error {
	ds, err := listDecisions(ctx, conn, "", false)
	if err != nil {
		return err
	}
	id, err := matchTeamID(ids.Decision, args[0], decisionIDs(ds))
	if err != nil {
		return err
	}
	msg := &protocol.TeamDecisionAnswer{Header: teamHeader(protocol.TypeTeamDecisionAnswer), DecisionID: id, Text: o.text}
	var d *protocol.TeamDecision
	if i := slices.IndexFunc(ds, func(d protocol.TeamDecision) bool { return d.DecisionID == id }); i >= 0 {
		d = &ds[i]
	}
	var choice string
	if len(args) == 2 {
		choice = args[1]
	}
	switch {
	case d == nil:
		// Unknown here: sent as given, for the daemon to answer.
		msg.Option = choice
	case choice == "" && o.text == "" && d.State != protocol.DecisionOpen:
		return o.explain(stdout, stderr, *d, "is "+d.State+", not open")
	case len(d.Options) == 0:
		// A free-text question: the answer is the text.
		if choice != "" && o.text != "" {
			return usageErrorf("%s is a free-text question: give the answer as an argument or with --text, not both", id)
		}
		if choice != "" {
			msg.Text = choice
		}
		if msg.Text == "" {
			return o.explain(stdout, stderr, *d, "is a free-text question: give the answer as an argument or with --text")
		}
	case choice == "":
		return o.explain(stdout, stderr, *d, "needs an option: its label or its number")
	default:
		label, index, ok := pickOption(d.Options, choice)
		if !ok {
			return usageErrorf("%q is not an option of %s: %s", choice, id, numberedOptions(d.Options))
		}
		if index >= 0 {
			msg.Index = &index
		} else {
			msg.Option = label
		}
	}
	if err := msg.Validate(); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var data protocol.TeamDecisionData
	if err := conn.Call(ctx, msg, &data); err != nil {
		return err
	}
	o.output.human(&data)
	if o.output.structured() {
		if err := o.output.write(stdout, data); err != nil {
			return err
		}
	}
	got := data.Decision
	if got.State == protocol.DecisionOpen && got.RefusedReason != "" {
		// A refused merge: the daemon left the decision open again.
		fmt.Fprintf(stderr, "shardctl: %s reopened: %s\nAnswer it again once the cause is fixed.\n", got.DecisionID, got.RefusedReason)
		return exitWith(exitFailed, errors.New(got.DecisionID+" reopened: "+got.RefusedReason), true)
	}
	if o.output.structured() {
		return nil
	}
	_, err = fmt.Fprintf(stdout, "%s %s%s\n", got.DecisionID, got.State, answerText(got.Answer))
	return err
}

// explain prints a decision for a person who gave no answer, with why on
// stderr: an open one fails as a usage error (exit 2) with how to answer
// it, a closed one as a failure (exit 1).
func (o *teamAnswerOptions) explain(stdout, stderr io.Writer, d protocol.TeamDecision, why string) error {
	one := []protocol.TeamDecision{d}
	humanDecisions(one)
	d = one[0]
	p := newPalette(stdout, o.g.noColor)
	what := d.Kind
	if d.TaskID != "" {
		what += " of " + d.TaskID
	}
	fmt.Fprintf(stdout, "%s  %s  %s\n", d.DecisionID, what, d.State)
	writeDecisionBody(stdout, d, p, "  ")
	fmt.Fprintf(stderr, "shardctl: %s %s\n", d.DecisionID, why)
	if d.State != protocol.DecisionOpen {
		return exitWith(exitFailed, fmt.Errorf("%s %s", d.DecisionID, why), true)
	}
	fmt.Fprintf(stderr, "Run 'shardctl team answer %s <option> [--text …]'.\n", d.DecisionID)
	return exitWith(exitUsage, fmt.Errorf("%s %s", d.DecisionID, why), true)
}

// pickOption resolves a person's choice against a decision's options: an
// exact label, then a label equal but for case, then a number from 1. A
// label comes back as such (index -1); a number as its 0-based index.
func pickOption(options []string, choice string) (label string, index int, ok bool) {
	if slices.Contains(options, choice) {
		return choice, -1, true
	}
	var folded []string
	for _, o := range options {
		if strings.EqualFold(o, strings.TrimSpace(choice)) {
			folded = append(folded, o)
		}
	}
	if len(folded) == 1 {
		return folded[0], -1, true
	}
	if n, err := strconv.Atoi(strings.TrimSpace(choice)); err == nil && n >= 1 && n <= len(options) {
		return options[n-1], n - 1, true
	}
	return "", 0, false
}
