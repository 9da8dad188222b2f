package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// attachOptions are the options of shardctl attach.
type attachOptions struct {
	g *globalOptions
}

// AddFlags registers the attach flags on cmd (it has none of its own).
func (o *attachOptions) AddFlags(*cobra.Command) {}

const attachHelp = `Commands:
  TEXT           send TEXT as a prompt (queued as a follow-up while a turn runs)
  /steer TEXT    steer the turn in flight with TEXT
  /abort         abort the turn in flight (also Ctrl-C on a terminal)
  /mode NAME     switch the agent's mode, e.g. /mode plan
  /model NAME    switch the model from the next provider call
  /quit          detach (also /exit, /detach, Ctrl-D or the end of input)
  //TEXT         send "/TEXT" as a prompt
While a question is open, the next line answers it.`

func newAttachCommand(g *globalOptions) *cobra.Command {
	o := &attachOptions{g: g}
	cmd := &cobra.Command{
		Use:   "attach AGENT",
		Short: "Talk to an agent interactively",
		Long: `Attach to AGENT as an interactive client (agent.attach): stream its text, show
its tool calls and their results, answer its permission and UI questions,
and send it prompts, steers, aborts and mode switches.

` + attachHelp + `

Permission questions take y (allow), a (allow always) or n (deny); a select
takes its number, a confirm y or n, an input the line as typed.

On a terminal, attach keeps an editable input line (with history) under the
output, colors it (unless --no-color or NO_COLOR) and word-wraps the text;
Ctrl-C aborts the turn in flight. Otherwise it writes plain lines and reads
plain lines: at the end of input it answers open questions with their
default (deny, cancel), waits for the turn it started to end, and detaches.

Exits 0 when detached, 1 if the connection is lost, 130 on SIGINT (when not
on a terminal).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0], cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.AddFlags(cmd)
	return cmd
}

func (o *attachOptions) run(ctx context.Context, agentID string, stdin io.Reader, stdout io.Writer) error {
	conn, err := o.g.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var att protocol.AgentAttachData
	attach := &protocol.AgentAttach{
		Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: agentID},
		Role:   protocol.RoleInteractive,
	}
	if err := conn.Call(ctx, attach, &att); err != nil {
		return fmt.Errorf("attach %s: %w", agentID, err)
	}

	pal := newPalette(stdout, o.g.noColor)
	var scr screen
	inF, inOK := stdin.(*os.File)
	outF, outOK := stdout.(*os.File)
	if inOK && outOK && term.IsTerminal(int(inF.Fd())) && term.IsTerminal(int(outF.Fd())) {
		tty, err := newTTYScreen(inF, outF, pal, promptIdle)
		if err != nil {
			return err
		}
		winch, done := make(chan os.Signal, 1), make(chan struct{})
		signal.Notify(winch, syscall.SIGWINCH)
		defer func() { signal.Stop(winch); close(done) }()
		go func() {
			for {
				select {
				case <-winch:
					tty.resize(int(outF.Fd()))
				case <-done:
					return
				}
			}
		}()
		scr = tty
	} else {
		scr = newPlainScreen(stdin, stdout, pal)
	}
	defer scr.close()

	s := &attachSession{
		ctx: ctx, conn: conn, agentID: agentID, scr: scr, p: scr.pal(),
		status: att.Status, mode: att.Info.Mode,
		cmds:    make(chan protocol.Typed, maxQueuedCommands),
		results: make(chan commandResult, maxQueuedCommands),
		stop:    make(chan struct{}),
	}
	senderDone := make(chan struct{})
	go func() { defer close(senderDone); s.send() }()
	defer func() {
		close(s.stop)
		conn.Close() // ends a Request in flight
		<-senderDone
	}()
	s.banner(att)
	return s.loop()
}

// maxQueuedCommands bounds the commands typed but not yet answered; more
// are refused with a line rather than blocking the session.
const maxQueuedCommands = 64

// commandResult is the daemon's answer to one command of the session.
type commandResult struct {
	cmd protocol.Typed
	err error
}

// Prompts of the terminal screen: ready for a prompt, or a turn in flight
// (a line typed then is queued as a follow-up).
const (
	promptIdle = "› "
	promptBusy = "⋯ "
)

// attachSession is one attach: the agent's state as the events tell it and
// the questions waiting for the user.
type attachSession struct {
	ctx     context.Context
	conn    *client.Conn
	agentID string
	scr     screen
	p       palette

	status protocol.AgentStatus
	mode   string
	inTurn bool // between turn_start and turn_end
	sent   bool // a prompt or steer was sent and no turn has ended since
	eof    bool // the input ended: detach once settled
	questionQueue

	// Commands go out through one sender goroutine, in order, and their
	// answers come back on results: the loop never waits on a response,
	// so it keeps draining events (the client stops reading responses
	// while its event buffer is full, and a flooding agent fills it).
	cmds     chan protocol.Typed
	results  chan commandResult
	stop     chan struct{}
	inflight int // commands queued or awaiting their answer
}

func (s *attachSession) banner(att protocol.AgentAttachData) {
	name := agentName(att.Info)
	head := "Attached to " + s.agentID
	if name != "-" {
		head += " (" + name + ")"
	}
	var facts []string
	facts = append(facts, string(att.Status))
	if att.Info.Model != "" {
		facts = append(facts, "model "+att.Info.Model)
	}
	if att.Info.Mode != "" {
		facts = append(facts, "mode "+att.Info.Mode)
	}
	s.scr.line(s.p.bold(head) + " — " + strings.Join(facts, ", "))
	s.scr.line(s.p.dim("Type a prompt; /help lists commands; /quit or Ctrl-D detaches."))
	s.refreshPrompt()
}

// busy reports whether a turn is in flight.
func (s *attachSession) busy() bool { return s.inTurn || midTurn(s.status) }

// settled reports whether a detach at the end of input loses nothing: no
// question is open, every command has its answer and the turn this session
// started has ended.
func (s *attachSession) settled() bool {
	return len(s.questions) == 0 && s.inflight == 0 && !s.sent && !s.busy()
}

func (s *attachSession) loop() error {
	for {
		if s.eof && s.settled() {
			s.detach()
			return nil
		}
		select {
		case ev, ok := <-s.conn.Events():
			if !ok {
				s.scr.endText()
				if errors.Is(s.conn.Err(), io.EOF) {
					return errors.New("the daemon closed the connection")
				}
				return fmt.Errorf("connection to the daemon lost: %w", s.conn.Err())
			}
			s.handle(ev.Msg)
		case r := <-s.results:
			s.answered(r)
		case in := <-s.scr.lines():
			quit, err := s.input(in)
			if err != nil || quit {
				s.detach()
				return err
			}
		case <-s.scr.interrupts():
			if s.busy() {
				s.scr.line(s.p.dim("(Ctrl-C: aborting the turn)"))
				s.command(&protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: s.agentID}})
			} else {
				s.scr.line(s.p.dim("(nothing to abort; /quit or Ctrl-D detaches)"))
			}
		case <-s.ctx.Done():
			s.scr.endText()
			return s.ctx.Err()
		}
	}
}

// detach leaves the agent, best effort.
func (s *attachSession) detach() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), abortGrace)
	defer cancel()
	_, _ = s.conn.Request(ctx, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: s.agentID}})
}

// refreshPrompt shows the open question, or whether a turn runs.
func (s *attachSession) refreshPrompt() {
	switch {
	case len(s.questions) > 0:
		s.scr.setPrompt(s.questionPrompt(s.questions[0]))
	case s.busy():
		s.scr.setPrompt(promptBusy)
	default:
		s.scr.setPrompt(promptIdle)
	}
}

func (s *attachSession) handle(msg protocol.Typed) {
	if msg.Head().AgentID != s.agentID {
		return
	}
	switch m := msg.(type) {
	case *protocol.Sync:
		s.status, s.mode = m.Status, m.Mode
		for _, raw := range m.PendingRequests {
			if pm, err := protocol.DecodeEvent(raw); err == nil {
				s.handle(withAgent(pm, s.agentID))
			}
		}
	case *protocol.Status:
		s.status = m.Status
	case *protocol.TurnStart:
		s.inTurn = true
	case *protocol.MessageDelta:
		if m.Kind == protocol.DeltaText {
			s.scr.text(m.TextDelta)
		}
	case *protocol.MessageComplete:
		s.scr.endText()
	case *protocol.ToolCall:
		s.scr.line(s.p.dim("⚙ " + strings.TrimSpace(m.Name+" "+toolTarget(m.Args))))
	case *protocol.ToolResult:
		line := "↳ " + resultSummary(m)
		if m.IsError {
			s.scr.line(s.p.red(line))
		} else {
			s.scr.line(s.p.dim(line))
		}
	case *protocol.TurnEnd:
		s.inTurn, s.sent = false, false
		s.scr.endText()
		done := "— turn ended"
		if m.Usage != nil {
			done += fmt.Sprintf(" (in %d, out %d tokens)", m.Usage.Input, m.Usage.Output)
		}
		s.scr.line(s.p.dim(done))
	case *protocol.PermissionRequest:
		s.enqueue(question{perm: m})
	case *protocol.UIRequest:
		if m.Kind == protocol.UINotify {
			s.scr.line(notifyLine(m))
			break
		}
		s.enqueue(question{ui: m})
	case *protocol.PermissionResolved:
		s.resolved(m.RequestID, firstNonEmpty(m.Decision, m.ChoiceID), m.Source)
	case *protocol.UIResolved:
		s.resolved(m.RequestID, "answered", m.Source)
	case *protocol.ErrorEvent:
		s.sent = false
		s.scr.line(s.p.red(fmt.Sprintf("error: %s: %s", m.Code, m.Message)))
	case *protocol.ModeChanged:
		s.mode = m.Mode
		s.scr.line(s.p.dim(fmt.Sprintf("mode: %s → %s", orDash(m.PreviousMode), m.Mode)))
	case *protocol.ModelChanged:
		s.scr.line(s.p.dim(fmt.Sprintf("model: %s → %s (from the next provider call)", orDash(m.Previous.ID), orDash(m.Active.ID))))
	case *protocol.Compaction:
		s.scr.line(s.p.dim(fmt.Sprintf("(context compacted: %d → %d tokens)", m.TokensBefore, m.TokensAfter)))
	case *protocol.AgentExited:
		s.inTurn, s.sent = false, false
		s.scr.line(s.p.red(fmt.Sprintf("runtime exited (%s): %s", m.RuntimeState, orDash(m.Reason))))
	}
	s.refreshPrompt()
}

func (s *attachSession) enqueue(q question) {
	if s.push(q) {
		s.ask()
	}
}

// resolved drops a question that was answered (here or elsewhere).
func (s *attachSession) resolved(id, how, source string) {
	if note, askNext, ok := s.drop(id, how, source); ok {
		s.scr.line(s.p.dim(note))
		if askNext {
			s.ask()
		}
	}
}

// ask shows the question at the head of the queue: its details (and a
// select's options) as lines,
// and the question itself as the prompt (on a terminal) or as a line.
func (s *attachSession) ask() {
	q := s.questions[0]
	if p := q.perm; p != nil {
		for _, d := range p.Details {
			if d.Label != "" {
				s.scr.line(fmt.Sprintf("  %s: %s", d.Label, d.Value))
			} else {
				s.scr.line("  " + d.Value)
			}
		}
	} else if u := q.ui; u.Kind == protocol.UISelect {
		for i, opt := range u.Options {
			s.scr.line(fmt.Sprintf("  %d) %s", i+1, opt))
		}
	}
	if _, plain := s.scr.(*plainScreen); plain {
		s.scr.line(s.p.paint(sgrYellow, strings.TrimSpace(s.questionPrompt(q))))
	} else {
		s.scr.endText()
	}
	s.refreshPrompt()
}

// questionPrompt is the one-line form of a question.
func (s *attachSession) questionPrompt(q question) string {
	if p := q.perm; p != nil {
		ask := strings.Join(strings.Fields(p.Prompt), " ")
		if ask == "" {
			ask = fmt.Sprintf("Allow %s?", strings.TrimSpace(p.ToolName+" "+toolTarget(p.Input)))
		}
		return fmt.Sprintf("%s %s: ", ask, permissionChoices(p))
	}
	u := q.ui
	head := strings.Trim(strings.TrimSpace(strings.Join([]string{u.Title, u.Message}, " — ")), " —")
	switch u.Kind {
	case protocol.UISelect:
		return fmt.Sprintf("%s [1-%d]: ", orDefault(head, "Choose"), len(u.Options))
	case protocol.UIConfirm:
		return fmt.Sprintf("%s [y/n]: ", orDefault(head, "Confirm?"))
	}
	if u.Prefill != "" {
		return fmt.Sprintf("%s [%s]: ", orDefault(head, "Input"), u.Prefill)
	}
	return orDefault(head, "Input") + ": "
}

// input handles one line (or the end of input); quit says to detach.
func (s *attachSession) input(in lineResult) (quit bool, err error) {
	if s.scr.echo() && !in.eof {
		s.scr.line(s.p.dim("› " + in.line))
	}
	line := strings.TrimRight(in.line, "\r\n")
	if len(s.questions) > 0 && (in.eof || !strings.HasPrefix(line, "/") || strings.HasPrefix(line, "//")) {
		s.answer(in)
		return false, nil
	}
	if in.eof {
		if _, tty := s.scr.(*ttyScreen); tty {
			return true, nil // Ctrl-D: the user leaves
		}
		s.eof = true
		if strings.TrimSpace(line) == "" {
			return false, nil
		}
	}
	trimmed := strings.TrimSpace(line)
	if trimmed == "" {
		return false, nil
	}
	if strings.HasPrefix(trimmed, "/") && !strings.HasPrefix(trimmed, "//") {
		return s.slash(trimmed)
	}
	if strings.HasPrefix(trimmed, "//") {
		trimmed = trimmed[1:]
	}
	prompt := &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: s.agentID}, Message: trimmed}
	if s.busy() {
		prompt.StreamingBehavior = protocol.BehaviorFollowUp
		s.scr.line(s.p.dim("(queued after the turn in flight)"))
	}
	if s.command(prompt) {
		s.sent = true
	}
	return false, nil
}

// slash runs a /command.
func (s *attachSession) slash(line string) (quit bool, err error) {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	h := func(typ string) protocol.Header { return protocol.Header{Type: typ, AgentID: s.agentID} }
	switch name {
	case "/quit", "/exit", "/detach", "/q":
		return true, nil
	case "/help", "/?":
		for l := range strings.SplitSeq(attachHelp, "\n") {
			s.scr.line(l)
		}
	case "/abort":
		s.command(&protocol.Abort{Header: h(protocol.TypeAbort)})
	case "/steer":
		if arg == "" {
			s.scr.line("usage: /steer TEXT")
			break
		}
		if s.command(&protocol.Steer{Header: h(protocol.TypeSteer), Message: arg}) {
			s.sent = true
		}
	case "/mode":
		if arg == "" {
			s.scr.line(fmt.Sprintf("mode is %s; usage: /mode NAME", orDash(s.mode)))
			break
		}
		s.command(&protocol.SetMode{Header: h(protocol.TypeSetMode), Mode: arg})
	case "/model":
		if arg == "" {
			s.scr.line("usage: /model NAME")
			break
		}
		s.command(&protocol.SetModel{Header: h(protocol.TypeSetModel), Model: arg})
	default:
		s.scr.line(fmt.Sprintf("unknown command %s; /help lists them (//%s sends it as a prompt)", name, name[1:]))
	}
	return false, nil
}

// command queues one command for the sender; ok reports that it was
// queued. Its answer arrives later on results (see answered).
func (s *attachSession) command(cmd protocol.Typed) (ok bool) {
	select {
	case s.cmds <- cmd:
		s.inflight++
		return true
	default:
		s.scr.line(s.p.red(fmt.Sprintf("%s: not sent: %d commands are still waiting for the daemon", cmd.Head().Type, maxQueuedCommands)))
		return false
	}
}

// send is the sender goroutine: it issues the queued commands one at a
// time, in order, and hands each answer to the loop.
func (s *attachSession) send() {
	for {
		select {
		case cmd := <-s.cmds:
			_, err := s.conn.Request(s.ctx, cmd)
			select {
			case s.results <- commandResult{cmd: cmd, err: err}:
			case <-s.stop:
				return
			}
		case <-s.stop:
			return
		}
	}
}

// answered shows a failed command's protocol error as a line. A lost
// connection shows up on the event channel.
func (s *attachSession) answered(r commandResult) {
	s.inflight--
	if r.err == nil {
		return
	}
	switch r.cmd.(type) {
	case *protocol.Prompt, *protocol.Steer:
		s.sent = false // no turn of ours is coming
	}
	var pe *protocol.Error
	if errors.As(r.err, &pe) {
		s.scr.line(s.p.red(fmt.Sprintf("%s: %s: %s", r.cmd.Head().Type, pe.Code, pe.Message)))
	} else if s.ctx.Err() == nil && s.conn.Err() == nil {
		s.scr.line(s.p.red(fmt.Sprintf("%s: %v", r.cmd.Head().Type, r.err)))
	}
	s.refreshPrompt()
}

// answer applies a line to the head question.
func (s *attachSession) answer(ans lineResult) {
	q := s.questions[0]
	if strings.HasPrefix(ans.line, "//") {
		ans.line = ans.line[1:]
	}
	var cmd protocol.Typed
	if p := q.perm; p != nil {
		decision, ok := parseDecision(ans, p)
		if !ok {
			s.scr.line(s.p.dim("(answer " + permissionChoices(p) + ")"))
			s.ask()
			return
		}
		if ans.eof {
			s.scr.line(s.p.dim("(no input: deny)"))
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
			return
		}
		cmd = &protocol.UIResponse{
			Header:    protocol.Header{Type: protocol.TypeUIResponse, AgentID: s.agentID},
			RequestID: q.ui.RequestID,
			Value:     value,
		}
	}
	s.questions = s.questions[1:]
	s.command(cmd)
	if len(s.questions) > 0 {
		s.ask()
	}
	s.refreshPrompt()
}
