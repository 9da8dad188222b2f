package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

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
}

// AddFlags registers the prompt flags on cmd.
func (o *promptOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.wait, "wait", true, "stream the turn until it ends (--wait=false is --no-wait)")
	cmd.Flags().BoolVar(&o.noWait, "no-wait", false, "return once the prompt is accepted instead of streaming the turn")
}

func newPromptCommand(g *globalOptions) *cobra.Command {
	o := &promptOptions{g: g}
	cmd := &cobra.Command{
		Use:   "prompt AGENT TEXT... [--wait]",
		Short: "Send a prompt and stream the reply",
		Long: `Attach to AGENT interactively, send TEXT (further arguments are joined with
spaces) and stream the assistant's text to stdout until the turn ends.

Everything else goes to stderr: tool calls ("⚙ write notes.md") and their
results ("↳ ok"), errors, and questions. When the agent asks for permission
shardctl asks "Allow write …? [y]es/[n]o/[a]lways: " and reads a line from
stdin (y allows, a allows always, n denies; end of input denies). UI
requests are answered the same way: a numbered choice for select, y/n for
confirm (sent as "true"/"false"), a line for input. If the agent is busy,
the prompt is queued as a follow-up and the output starts with its turn.

Exits 1 if the agent reports an error or a command fails, 130 on Ctrl-C
(after asking the agent to abort the turn).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := strings.Join(args[1:], " ")
			if strings.TrimSpace(text) == "" {
				return usageErrorf("empty prompt")
			}
			return o.run(cmd.Context(), args[0], text, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.AddFlags(cmd)
	return cmd
}

func (o *promptOptions) run(ctx context.Context, agentID, text string, stdin io.Reader, stdout, stderr io.Writer) error {
	conn, err := o.g.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if agentID, err = resolveAgent(ctx, conn, agentID); err != nil {
		return err
	}

	// Events are consumed only after the prompt is accepted; the client
	// buffers them meanwhile, and they are few (a sync, maybe some
	// orchestrator events).
	var att protocol.AgentAttachData
	attach := &protocol.AgentAttach{
		Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: agentID},
		Role:   protocol.RoleInteractive,
	}
	if err := conn.Call(ctx, attach, &att); err != nil {
		return fmt.Errorf("attach %s: %w", agentID, err)
	}
	busy := midTurn(att.Status)
	prompt := &protocol.Prompt{
		Header:  protocol.Header{Type: protocol.TypePrompt, AgentID: agentID},
		Message: text,
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

// question is a permission or UI request waiting for the user.
// questionQueue holds the questions waiting for the user, oldest first;
// prompt and attach share it. Each request id is queued once, so one that
// is both in a sync and broadcast is asked once.
type questionQueue struct {
	questions []question
	seen      map[string]bool
}

// push queues q and reports whether it is now the head (to be asked).
func (qq *questionQueue) push(q question) (head bool) {
	if qq.seen == nil {
		qq.seen = map[string]bool{}
	}
	if qq.seen[q.id()] {
		return false
	}
	qq.seen[q.id()] = true
	qq.questions = append(qq.questions, q)
	return len(qq.questions) == 1
}

// drop removes the question with id, answered here or elsewhere: ok says
// it was queued, note is the line to show, askNext that a new head must be
// asked.
func (qq *questionQueue) drop(id, how, source string) (note string, askNext, ok bool) {
	i := slices.IndexFunc(qq.questions, func(q question) bool { return q.id() == id })
	if i < 0 {
		return "", false, false
	}
	qq.questions = slices.Delete(qq.questions, i, i+1)
	if source != "" {
		how += " by " + source
	}
	return fmt.Sprintf("(%s: %s)", id, how), i == 0 && len(qq.questions) > 0, true
}

type question struct {
	perm *protocol.PermissionRequest
	ui   *protocol.UIRequest
	// from is the agent that asks when it is not the attached one: a subagent
	// whose question the daemon delegated up (docs/protocol.md §6.3); the
	// answer carries its agent_id. from is empty for the attached agent.
	from string
}

func (q question) id() string {
	if q.perm != nil {
		return q.perm.RequestID
	}
	return q.ui.RequestID
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
	questionQueue
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
	case *protocol.PermissionRequest:
		s.enqueue(question{perm: m})
	case *protocol.UIRequest:
		if m.Kind == protocol.UINotify {
			s.note(notifyLine(m))
			break
		}
		s.enqueue(question{ui: m})
	case *protocol.PermissionResolved:
		s.resolved(m.RequestID, firstNonEmpty(m.Decision, m.ChoiceID), m.Source)
	case *protocol.UIResolved:
		s.resolved(m.RequestID, "answered", m.Source)
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

func (s *promptSession) enqueue(q question) {
	if s.push(q) {
		s.ask()
	}
}

// resolved drops a question that was answered (here or elsewhere).
func (s *promptSession) resolved(id, how, source string) {
	if note, askNext, ok := s.drop(id, how, source); ok {
		s.note(note)
		if askNext {
			s.ask()
		}
	}
}

// ask prints the question at the head of the queue.
func (s *promptSession) ask() {
	s.separateLine()
	q := s.questions[0]
	if p := q.perm; p != nil {
		if p.Prompt != "" {
			fmt.Fprintln(s.errw, p.Prompt)
		}
		for _, d := range p.Details {
			if d.Label != "" {
				fmt.Fprintf(s.errw, "  %s: %s\n", d.Label, d.Value)
			} else {
				fmt.Fprintf(s.errw, "  %s\n", d.Value)
			}
		}
		if n := alwaysNote(p); n != "" {
			fmt.Fprintln(s.errw, s.pal.dim(n))
		}
		target := toolTarget(p.Input)
		fmt.Fprintf(s.errw, "Allow %s? %s: ", strings.TrimSpace(p.ToolName+" "+target), permissionChoices(p))
		return
	}
	u := q.ui
	head := strings.TrimSpace(strings.Join([]string{u.Title, u.Message}, " — "))
	head = strings.Trim(head, " —")
	switch u.Kind {
	case protocol.UISelect:
		if head != "" {
			fmt.Fprintln(s.errw, head)
		}
		for i, opt := range u.Options {
			fmt.Fprintf(s.errw, "  %d) %s\n", i+1, opt)
		}
		fmt.Fprintf(s.errw, "Choose [1-%d]: ", len(u.Options))
	case protocol.UIConfirm:
		fmt.Fprintf(s.errw, "%s [y/n]: ", orDefault(head, "Confirm?"))
	default: // input, editor
		if u.Prefill != "" {
			fmt.Fprintf(s.errw, "%s [%s]: ", orDefault(head, "Input"), u.Prefill)
		} else {
			fmt.Fprintf(s.errw, "%s: ", orDefault(head, "Input"))
		}
	}
}

// answer applies one line of user input to the head question.
func (s *promptSession) answer(ans lineResult) error {
	q := s.questions[0]
	if s.lines.echo || ans.eof {
		fmt.Fprintln(s.errw, ans.line) // ends the open question line
	}
	var cmd protocol.Typed
	if p := q.perm; p != nil {
		decision, ok := parseDecision(ans, p)
		if !ok {
			s.ask()
			return nil
		}
		if ans.eof {
			fmt.Fprintln(s.errw, "(no input: deny)")
		}
		cmd = &protocol.PermissionResponse{
			Header:    protocol.Header{Type: protocol.TypePermissionResponse, AgentID: s.agentID},
			RequestID: p.RequestID,
			Decision:  decision,
		}
	} else {
		value, ok := parseUIValue(ans, q.ui)
		if !ok {
			s.ask()
			return nil
		}
		cmd = &protocol.UIResponse{
			Header:    protocol.Header{Type: protocol.TypeUIResponse, AgentID: s.agentID},
			RequestID: q.ui.RequestID,
			Value:     value,
		}
	}
	s.questions = s.questions[1:]
	if _, err := requestDraining(s.ctx, s.conn, cmd, &s.backlog); err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			return err
		}
		s.fail(err)
	}
	if len(s.questions) > 0 {
		s.ask()
	}
	return nil
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

// lineResult is one line of user input; eof marks the end of input (line
// then holds any final unterminated text).
type lineResult struct {
	line string
	eof  bool
}

// lineReader reads stdin lines in a goroutine, started on first use, so
// that waiting for an answer never blocks event handling.
type lineReader struct {
	r    io.Reader
	once sync.Once
	ch   chan lineResult
	quit chan struct{}
	// echo: input is not a terminal, so answers are echoed to keep the
	// transcript on stderr readable.
	echo bool
}

func newLineReader(r io.Reader) *lineReader {
	f, ok := r.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	return &lineReader{r: r, ch: make(chan lineResult), quit: make(chan struct{}), echo: !tty}
}

// C returns the channel of lines. After end of input it yields eof results
// forever, so every later question is answered by its default.
func (l *lineReader) C() <-chan lineResult {
	l.once.Do(func() { go l.read() })
	return l.ch
}

func (l *lineReader) read() {
	br := bufio.NewReader(l.r)
	for {
		line, err := br.ReadString('\n')
		res := lineResult{line: strings.TrimRight(line, "\r\n"), eof: err != nil}
		select {
		case l.ch <- res:
		case <-l.quit:
			return
		}
		if err != nil {
			for {
				select {
				case l.ch <- lineResult{eof: true}:
				case <-l.quit:
					return
				}
			}
		}
	}
}

// stop ends the goroutine once its current read returns (a read blocked on
// a terminal ends with the process).
func (l *lineReader) stop() { close(l.quit) }
