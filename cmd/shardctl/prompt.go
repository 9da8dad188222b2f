package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// abortGrace bounds the abort sent when a running prompt is interrupted.
const abortGrace = 2 * time.Second

// promptOptions are the options of shardctl prompt.
type promptOptions struct {
	g      *globalOptions
	wait   bool
	noWait bool
	images []string // --image paths
}

// AddFlags registers the prompt flags on cmd.
func (o *promptOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.wait, "wait", true, "stream the turn until it ends (--wait=false is --no-wait)")
	cmd.Flags().BoolVar(&o.noWait, "no-wait", false, "return once the prompt is accepted instead of streaming the turn")
	cmd.Flags().StringArrayVar(&o.images, "image", nil, "attach the image file at `PATH` (PNG, JPEG, GIF or WebP, at most 5 MiB; repeatable)")
}

func newPromptCommand(g *globalOptions) *cobra.Command {
	o := &promptOptions{g: g}
	cmd := &cobra.Command{
		Use:   "prompt AGENT [TEXT...] [--image PATH]... [--wait]",
		Short: "Send a prompt and stream the reply",
		Long: `Attach to AGENT interactively, send TEXT (further arguments are joined with
spaces) and stream the assistant's text to stdout until the turn ends.

--image attaches an image file (repeatable); with images, TEXT may be left
out. An agent whose model (or third-party agent) takes no images refuses
the prompt (UNSUPPORTED); nothing is sent without its images.

Everything else goes to stderr: tool calls ("⚙ write notes.md") and their
results ("↳ ok"), errors, and questions. When the agent asks for permission
shardctl asks "Allow write …? [y]es/[n]o/[a]lways: " and reads a line from
stdin (y allows, a allows always, n denies, or the number of one of the
request's listed choices; end of input denies); a reason for the agent may
follow the answer ("n use make instead"). UI requests are answered the same
way: a numbered choice for select (several, "1,3", for a multi-select), y/n
for confirm (sent as "true"/"false"), a line for input and editor. If the agent is busy,
the prompt is queued as a follow-up and the output starts with its turn.

Exits 1 if the agent reports an error or a command fails, 130 on Ctrl-C
(after asking the agent to abort the turn).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := strings.Join(args[1:], " ")
			if strings.TrimSpace(text) == "" && len(o.images) == 0 {
				return usageErrorf("empty prompt")
			}
			images, err := readImages(o.images)
			if err != nil {
				return usageErrorf("%v", err)
			}
			return o.run(cmd.Context(), args[0], text, images, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.AddFlags(cmd)
	return cmd
}

func (o *promptOptions) run(ctx context.Context, agent, text string, images []protocol.Image, stdin io.Reader, stdout, stderr io.Writer) error {
	// Events are consumed only after the prompt is accepted; the client
	// buffers them meanwhile, and they are few (a sync, maybe some
	// orchestrator events).
	conn, agentID, att, err := o.g.attachInteractive(ctx, agent)
	if err != nil {
		return err
	}
	defer conn.Close()
	busy := midTurn(att.Status)
	prompt := &protocol.Prompt{
		Header:  protocol.Header{Type: protocol.TypePrompt, AgentID: agentID},
		Message: text,
		Images:  images,
	}
	if busy {
		prompt.StreamingBehavior = protocol.BehaviorFollowUp
	}
	lines := newLineReader(stdin)
	defer lines.stop()
	s := &promptSession{
		ctx:        ctx,
		conn:       conn,
		agentID:    agentID,
		out:        stdout,
		errw:       stderr,
		pal:        newPalette(stderr, o.g.noColor),
		lines:      lines,
		waitOthers: busy,
	}
	s.questioner = questioner{view: s, agentID: agentID}
	if _, err := requestDraining(ctx, conn, prompt, &s.backlog); err != nil {
		if ctx.Err() != nil {
			return s.interrupted() // the prompt may have been accepted
		}
		return err
	}
	if o.noWait || !o.wait {
		return nil
	}
	return s.loop()
}

// midTurn reports whether a status means a turn is in flight.
func midTurn(s protocol.AgentStatus) bool {
	switch s {
	case protocol.StatusStreaming, protocol.StatusWaitingForPermission, protocol.StatusWaitingForUI:
		return true
	}
	return false
}

// promptSession follows one prompt's turn.
type promptSession struct {
	ctx     context.Context
	conn    *client.Conn
	agentID string
	out     io.Writer // model text only
	errw    io.Writer // everything else
	pal     palette
	lines   *lineReader

	waitOthers bool   // a turn that is not ours was in flight at attach
	started    bool   // our turn has started
	turnID     string // our turn's id
	failure    error  // the first error event or failed command
	midLine    bool   // stdout ends without a newline
	separate   bool   // a terminal cursor may sit after model text: start stderr lines on a new line
	questioner
	// backlog holds events taken off the connection while a command
	// waited for its response (requestDraining); they come first.
	backlog []client.Event
}

// loop consumes events until our turn ends, the agent fails, the
// connection ends, or ctx does.
func (s *promptSession) loop() error {
	defer s.endLine()
	for {
		var answers <-chan lineResult
		if len(s.questions) > 0 {
			answers = s.lines.C()
		}
		if len(s.backlog) > 0 { // events that arrived during a command come first
			ev := s.backlog[0]
			s.backlog = s.backlog[1:]
			done, err := s.handle(ev.Msg)
			if err != nil {
				return err
			}
			if done {
				return s.result()
			}
			continue
		}
		select {
		case ev, ok := <-s.conn.Events():
			if !ok {
				return fmt.Errorf("connection to the daemon lost: %w", s.conn.Err())
			}
			done, err := s.handle(ev.Msg)
			if err != nil {
				return err
			}
			if done {
				return s.result()
			}
		case ans := <-answers:
			if s.lines.echo || ans.eof {
				fmt.Fprintln(s.errw, ans.line) // ends the open question line
			}
			if err := s.answer(ans); err != nil {
				return err
			}
		case <-s.ctx.Done():
			return s.interrupted()
		}
	}
}

// result is the outcome once the turn is over.
func (s *promptSession) result() error {
	if s.failure != nil {
		return &exitError{code: exitFailed, err: s.failure, printed: true}
	}
	return nil
}

// handle applies one event; done reports that the prompt is finished.
func (s *promptSession) handle(msg protocol.Typed) (done bool, err error) {
	if msg.Head().AgentID != s.agentID {
		return false, nil
	}
	safeEvent(msg) // terminal safety: see sanitize.go
	if s.take("", msg) {
		return false, nil
	}
	switch m := msg.(type) {
	case *protocol.Sync:
		for _, raw := range m.PendingRequests {
			if pm, err := protocol.DecodeEvent(raw); err == nil {
				s.handle(withAgent(pm, s.agentID))
			}
		}
	case *protocol.TurnStart:
		if !s.started && !s.waitOthers {
			s.started, s.turnID = true, m.TurnID
		}
	case *protocol.TurnEnd:
		switch {
		case s.started && (s.turnID == "" || m.TurnID == s.turnID):
			return true, nil
		case !s.started:
			s.waitOthers = false // the turn in flight at attach is over; ours is next
		}
	case *protocol.MessageDelta:
		if s.started && m.Kind == protocol.DeltaText && m.TextDelta != "" {
			if _, err := io.WriteString(s.out, m.TextDelta); err != nil {
				return false, fmt.Errorf("write output: %w", err)
			}
			s.midLine = !strings.HasSuffix(m.TextDelta, "\n")
			s.separate = s.midLine
		}
	case *protocol.ToolCall:
		if s.started {
			s.note(s.pal.dim("⚙ " + strings.TrimSpace(m.Name+" "+toolTarget(m.Args))))
		}
	case *protocol.ToolResult:
		if s.started {
			s.note(s.pal.dim("↳ " + resultSummary(m)))
		}
	case *protocol.ErrorEvent:
		s.fail(&protocol.Error{Code: m.Code, Message: m.Message})
		return m.Fatal, nil
	case *protocol.Status:
		// After an error the turn may end without turn_end: stop once the
		// agent settles.
		if s.failure != nil && (m.Status == protocol.StatusIdle || m.Status == protocol.StatusError) {
			return true, nil
		}
	case *protocol.AgentExited:
		s.fail(fmt.Errorf("agent %s exited (%s): %s", s.agentID, m.RuntimeState, orDash(m.Reason)))
		return true, nil
	}
	return false, nil
}

// withAgent tags a pending request decoded from sync with the agent id (a
// runtime's snapshot may omit it).
func withAgent(msg protocol.Typed, agentID string) protocol.Typed {
	if msg.Head().AgentID == "" {
		msg.Head().AgentID = agentID
	}
	return msg
}

// fail records (and prints) an error; the first one decides the exit.
func (s *promptSession) fail(err error) {
	s.separateLine()
	printError(s.errw, err)
	if s.failure == nil {
		s.failure = err
	}
}

// note writes one line to stderr.
func (s *promptSession) note(line string) {
	s.separateLine()
	fmt.Fprintln(s.errw, line)
}

// separateLine starts stderr output on a new line when model text left the
// cursor mid-line (stdout and stderr usually share the terminal). The
// newline goes to stderr, so stdout stays exactly the model's text.
func (s *promptSession) separateLine() {
	if s.separate {
		fmt.Fprintln(s.errw)
		s.separate = false
	}
}

// endLine terminates the model text with a newline once the turn is over.
func (s *promptSession) endLine() {
	if s.midLine {
		fmt.Fprintln(s.out)
		s.midLine = false
		s.separate = false
	}
}

// The questionView of the shared question path (questioner.go): questions
// and notes go to stderr, and an answer is a request that keeps draining
// events.

func (s *promptSession) say(line string)    { s.note(line) }
func (s *promptSession) remark(line string) { s.note(line) }

// sendAnswer sends the answer; a refused one is the prompt's failure, a
// lost connection ends it.
func (s *promptSession) sendAnswer(cmd protocol.Typed) error {
	if _, err := requestDraining(s.ctx, s.conn, cmd, &s.backlog); err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			return err
		}
		s.fail(err)
	}
	return nil
}

// ask prints q, the head of the queue, and leaves the cursor after it.
func (s *promptSession) ask(q question, _ bool) {
	s.separateLine()
	if p := q.perm; p != nil && p.Prompt != "" {
		fmt.Fprintln(s.errw, p.Prompt)
	}
	if u := q.ui; u != nil && u.Kind == protocol.UISelect && uiHead(u) != "" {
		fmt.Fprintln(s.errw, uiHead(u))
	}
	for _, l := range detailLines(q) {
		fmt.Fprintln(s.errw, l)
	}
	switch p, u := q.perm, q.ui; {
	case p != nil:
		if n := alwaysNote(p); n != "" {
			fmt.Fprintln(s.errw, s.pal.dim(n))
		}
		if len(p.Choices) > 0 {
			fmt.Fprintln(s.errw, s.pal.dim(reasonNote))
		}
		fmt.Fprintf(s.errw, "%s %s: ", allowQuestion(p), permissionChoices(p))
	case u.Kind == protocol.UISelect:
		fmt.Fprintf(s.errw, "Choose %s: ", selectRange(u))
	default:
		fmt.Fprint(s.errw, uiQuestion(u))
	}
}

// interrupted asks the agent to stop our turn, best effort, after Ctrl-C.
// A turn that is not ours (in flight while ours waits) is left alone.
func (s *promptSession) interrupted() error {
	s.endLine()
	if s.started || !s.waitOthers {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), abortGrace)
		defer cancel()
		_, _ = s.conn.Request(ctx, &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: s.agentID}})
	}
	return &exitError{code: exitInterrupted, err: errors.New("interrupted: turn aborted")}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
