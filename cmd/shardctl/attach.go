package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// attachOptions are the options of shardctl attach.
type attachOptions struct {
	g         *globalOptions
	reconnect time.Duration
}

// AddFlags registers the attach flags on cmd.
func (o *attachOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&o.reconnect, "reconnect", defaultReconnect, "when the connection is lost, keep reconnecting (with backoff) for this long, then attach again; 0 exits at once")
}

const attachHelp = `Commands:
  TEXT           send TEXT as a prompt (queued as a follow-up while a turn runs)
  /steer TEXT    steer the turn in flight with TEXT
  /image PATH    attach an image file to the next prompt or /steer (repeatable;
                 /image alone lists them, /image clear drops them)
  /send          send the attached images as a prompt without text
  /abort         abort the turn in flight (also Ctrl-C on a terminal)
  /mode NAME     switch the agent's mode, e.g. /mode plan
  /model NAME    switch the model from the next provider call (a name or a
                 provider/model id: any configured provider); /model lists them
  /reasoning [LEVEL]  list the model's reasoning levels, or switch to LEVEL
  /compact [TOKENS]   compact the context now (keeping about TOKENS recent tokens)
  /fork [ENTRY]  fork the conversation at message ENTRY (default: the last one)
                 into a new session, and create an agent on it to talk to
  /sessions      list this agent's session and its forks
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
and send it prompts, steers, aborts, mode, model and reasoning switches,
compactions and forks.

` + attachHelp + `

Permission questions take y (allow), a (allow always) or n (deny), or the
number of one of the request's listed choices (e.g. "Always allow ` + "`go test …`" + `"),
sent as its choice_id; a reason for the agent may follow the answer ("n use
make instead"). A select takes its number (a multi-select several: 1,3), a
confirm y or n (sent as "true"/"false"), an input or editor the line as typed.

On a terminal, attach keeps an editable input line (with history) under the
output, colors it (unless --no-color or NO_COLOR) and word-wraps the text;
Ctrl-C aborts the turn in flight. Otherwise it writes plain lines and reads
plain lines: at the end of input it answers open questions with their
default (deny, cancel), waits for the turn it started to end, and detaches.

When the connection is lost (the daemon restarted), attach says so and
reconnects with backoff for up to --reconnect, then attaches again and shows
what the agent did meanwhile (the messages after the last one shown); a turn
this session started may have been lost with the daemon. In a cluster, a
connection lost with its node goes on through another node of the last
cluster.status (its socket, on this machine; with --url its web_url, with
its token of $SHARD_TOKEN), then that node again.

Exits 0 when detached, 1 if the connection is lost and does not come back
within --reconnect, 130 on SIGINT (when not on a terminal).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0], cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.AddFlags(cmd)
	return cmd
}

func (o *attachOptions) run(ctx context.Context, agent string, stdin io.Reader, stdout io.Writer) error {
	conn, agentID, att, err := o.g.attachInteractive(ctx, agent)
	if err != nil {
		return err
	}
	defer func() { conn.Close() }() // the connection in use at the end
	// In a cluster, where to go when this node is lost: the nodes of
	// its cluster.status (best effort: without it, the same socket).
	fo := client.Failover{Web: o.g.url != ""}
	if o.reconnect > 0 {
		sctx, cancel := context.WithTimeout(ctx, o.g.timeout)
		if st, err := client.ClusterStatus(sctx, conn); err == nil {
			fo.Observe(st)
		}
		cancel()
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

	var rc reconnector
	seen := &attachSeen{}
	for first := true; ; first = false {
		err := o.session(ctx, conn, agentID, att, scr, first, seen)
		var lost *errConnLost
		if !errors.As(err, &lost) || o.reconnect <= 0 || ctx.Err() != nil {
			return err
		}
		scr.line(pal.red(fmt.Sprintf("(%v; reconnecting for up to %s…)", lost.err, o.reconnect)))
		if len(fo.Candidates()) > 0 {
			from := fo.Node()
			c, a, node, err := o.g.failover(ctx, &rc, &fo, o.reconnect, agentID, lost.err)
			if err != nil {
				return err
			}
			conn, att = c, a
			scr.line(pal.dim("(" + client.FailoverNote(safe(from), safe(node)) + ")"))
			continue
		}
		c, a, err := o.g.reattach(ctx, &rc, o.reconnect, agentID, lost.err)
		if err != nil {
			return err
		}
		conn, att = c, a
		scr.line(pal.dim("(reconnected)"))
	}
}

// attachSeen is what an attach has shown of the agent's conversation,
// across its reconnects: the resync after a reconnect shows the messages
// after lastMsg, less the tool results already shown live.
type attachSeen struct {
	lastMsg string          // the last message shown (or in the last sync)
	results map[string]bool // tool_call_ids whose results were shown after lastMsg
}

// message notes message id as shown.
func (a *attachSeen) message(id string) {
	if id != "" {
		a.lastMsg, a.results = id, nil
	}
}

// result notes a tool result shown live.
func (a *attachSeen) result(toolCallID string) {
	if a.results == nil {
		a.results = map[string]bool{}
	}
	a.results[toolCallID] = true
}

// unseen drops the tool results already shown from msgs.
func (a *attachSeen) unseen(msgs []protocol.Message) []protocol.Message {
	var out []protocol.Message
	for _, m := range msgs {
		var blocks []protocol.ContentBlock
		for _, b := range m.Content {
			if b.Type == protocol.BlockToolResult && a.results[b.ToolCallID] {
				continue
			}
			blocks = append(blocks, b)
		}
		if len(blocks) > 0 {
			m.Content = blocks
			out = append(out, m)
		}
	}
	return out
}

// session runs one attach over conn until it ends; a lost connection is
// an *errConnLost, which run reconnects. first says it is the first (the
// banner and the recent turns are shown once).
func (o *attachOptions) session(ctx context.Context, conn *client.Conn, agentID string, att protocol.AgentAttachData, scr screen, first bool, seen *attachSeen) error {
	s := &attachSession{
		seen: seen,
		ctx:  ctx, conn: conn, agentID: agentID, scr: scr, p: scr.pal(),
		status: att.Status, mode: att.Info.Mode, info: att.Info, namesC: make(chan map[string]string, 1),
		cmds:    make(chan protocol.Typed, maxQueuedCommands),
		results: make(chan commandResult, maxQueuedCommands),
		stop:    make(chan struct{}),
		synced:  !first,
	}
	s.questioner = questioner{view: s, agentID: agentID, names: map[string]string{}}
	senderDone, namesDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(senderDone); s.send() }()
	go func() { defer close(namesDone); s.namesC <- agentNames(ctx, conn) }()
	defer func() {
		close(s.stop)
		conn.Close() // ends a Request in flight
		<-senderDone
		<-namesDone
	}()
	if first {
		s.banner(att)
	} else {
		s.refreshPrompt()
	}
	return s.loop()
}

// agentNames maps every agent's id to its name, best effort (a daemon
// that fails agent.list only costs the names of delegated questions).
func agentNames(ctx context.Context, conn *client.Conn) map[string]string {
	names := map[string]string{}
	var data protocol.AgentListData
	if err := readAllAgents(ctx, conn, &data); err == nil {
		for _, a := range data.Agents {
			if n := agentName(a); n != "-" {
				names[a.AgentID] = n
			}
		}
	}
	return names
}

// agentNamesOf maps the named agents among ids to their names, asking
// agent.status for each distinct one: a jobs table names only its
// parents, and reading every agent to name a page of them costs as much
// as the daemon's history (unknown or removed ids stay unnamed).
func agentNamesOf(ctx context.Context, conn *client.Conn, ids []string) map[string]string {
	names := map[string]string{}
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		var data protocol.AgentListData
		q := &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}
		if err := conn.Call(ctx, q, &data); err != nil || len(data.Agents) != 1 {
			continue
		}
		if n := agentName(data.Agents[0]); n != "-" {
			names[id] = n
		}
	}
	return names
}

// parentsOf lists the parents of jobs, in order (agentNamesOf drops
// repeats).
func parentsOf(jobs []protocol.OpJob) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.ParentAgentID)
	}
	return out
}

// maxQueuedCommands bounds the commands typed but not yet answered; more
// are refused with a line rather than blocking the session.
const maxQueuedCommands = 64

// commandResult is the daemon's answer to one command of the session.
type commandResult struct {
	cmd  protocol.Typed
	resp *protocol.Response // nil on error
	err  error
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
	info   protocol.AgentInfo // as attached: the agent a /fork creates runs like it
	// forkHead: a /fork without an entry waits for the session_op list
	// that names the session's last entry.
	forkHead bool
	// effort is the level a /reasoning LEVEL is for, while the
	// list_reasoning_levels that names the active model is answered.
	effort string
	// namesC brings the names of the agents known at attach (subagents
	// included), to say who asks a delegated question: agent.list is asked
	// in the background.
	namesC chan map[string]string
	inTurn bool // between turn_start and turn_end
	synced bool // the first sync (and its recent turns) was shown
	// seen is what the attach showed of the conversation, across its
	// reconnects (the resync's start).
	seen *attachSeen
	sent bool // a prompt or steer was sent and no turn has ended since
	eof  bool // the input ended: detach once settled
	questioner

	// Commands go out through one sender goroutine, in order, and their
	// answers come back on results: the loop never waits on a response,
	// so it keeps draining events (the client stops reading responses
	// while its event buffer is full, and a flooding agent fills it).
	cmds     chan protocol.Typed
	results  chan commandResult
	stop     chan struct{}
	inflight int // commands queued or awaiting their answer

	// images are the images /image attached, sent with the next prompt,
	// /steer or /send; imagePaths are their paths, for /image.
	images     []protocol.Image
	imagePaths []string
}

// takeImages returns the attached images and forgets them.
func (s *attachSession) takeImages() []protocol.Image {
	ims := s.images
	s.images, s.imagePaths = nil, nil
	return ims
}

func (s *attachSession) banner(att protocol.AgentAttachData) {
	safeAll(&att)
	name := agentName(att.Info)
	head := "Attached to " + s.agentID
	if name != "-" {
		head += " (" + name + ")"
	}
	var facts []string
	facts = append(facts, string(att.Status))
	if att.Info.Model != "" {
		facts = append(facts, "model "+strings.Trim(att.Info.Provider+"/"+att.Info.Model, "/"))
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

// settled reports whether a detach at the end of input loses nothing: the
// agent's sync (and its recent turns) was shown, no question is open, every
// command has its answer and the turn this session started has ended. An
// input that ends at once (`shardctl attach ID </dev/null`) still shows
// the transcript.
func (s *attachSession) settled() bool {
	return s.synced && len(s.questions) == 0 && s.inflight == 0 && !s.sent && !s.busy()
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
				return connEnded(s.conn)
			}
			s.handle(ev.Msg)
		case r := <-s.results:
			s.answered(r)
		case names := <-s.namesC:
			for id, n := range names {
				s.names[id] = n
			}
			s.refreshPrompt() // a delegated question asked meanwhile gets its name
		case in := <-s.inputLines():
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

// inputLines is where the loop takes input now. Piped input is taken one
// line at a time, in order: the next line waits until the turn the last
// one started has ended and every command has its answer (unless a
// question waits for it). Read ahead, "sim: say A\nsim: say B" sent B
// while A ran and the end of input detached before B's turn showed.
// A person at a terminal types ahead freely (a prompt then queues as a
// follow-up).
func (s *attachSession) inputLines() <-chan lineResult {
	if _, plain := s.scr.(*plainScreen); plain && len(s.questions) == 0 && (s.sent || s.busy() || s.inflight > 0) {
		return nil
	}
	return s.scr.lines()
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

// handle applies one event. Another agent's are a subagent's questions:
// a subagent of the attached one with no interactive client of its own has
// its permission and UI requests delegated to this attachment with its own
// agent_id (docs/protocol.md §6.3), and they are asked like the agent's
// own, naming the child. Other events of other agents are not this
// session's.
func (s *attachSession) handle(msg protocol.Typed) {
	from := msg.Head().AgentID
	if from == s.agentID {
		from = ""
	} else if !questionEvent(msg) {
		return
	}
	safeEvent(msg) // terminal safety: see sanitize.go
	if s.take(from, msg) {
		s.refreshPrompt()
		return
	}
	switch m := msg.(type) {
	case *protocol.Sync:
		s.status, s.mode = m.Status, m.Mode
		if !s.synced {
			s.synced = true
			s.showRecent(m)
		} else {
			s.showMissed(m)
		}
		if w := m.LiveWindow.Messages; len(w) > 0 {
			s.seen.message(w[len(w)-1].ID)
		}
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
		s.seen.message(m.MessageID)
	case *protocol.ToolCall:
		s.scr.line(s.p.dim("⚙ " + strings.TrimSpace(m.Name+" "+toolTarget(m.Args))))
	case *protocol.ToolResult:
		s.seen.result(m.ToolCallID)
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
	case *protocol.ErrorEvent:
		s.sent = false
		s.scr.line(s.p.red(fmt.Sprintf("error: %s: %s", m.Code, m.Message)))
	case *protocol.ModeChanged:
		s.mode = m.Mode
		s.scr.line(s.p.dim(fmt.Sprintf("mode: %s → %s", orDash(m.PreviousMode), m.Mode)))
	case *protocol.ModelChanged:
		s.scr.line(s.p.dim(fmt.Sprintf("model: %s → %s (from the next provider call)", orDash(m.Previous.ID), orDash(m.Active.ID))))
	case *protocol.ReasoningLevelChanged:
		s.scr.line(s.p.dim(fmt.Sprintf("reasoning: %s → %s (from the next provider call)", orDash(m.Previous), orDash(m.Active))))
	case *protocol.AgentUpdated:
		s.scr.line(s.p.dim("title: " + orDash(m.Info.Title)))
	case *protocol.Compaction:
		s.scr.line(s.p.dim(fmt.Sprintf("(context compacted: %d → %d tokens)", m.TokensBefore, m.TokensAfter)))
	case *protocol.AgentExited:
		s.inTurn, s.sent = false, false
		s.scr.line(s.p.red(fmt.Sprintf("runtime exited (%s): %s", m.RuntimeState, orDash(m.Reason))))
	}
	s.refreshPrompt()
}

// input handles one line (or the end of input); quit says to detach.
func (s *attachSession) input(in lineResult) (quit bool, err error) {
	if s.scr.echo() && !in.eof {
		s.scr.line(s.p.dim("› " + in.line))
	}
	line := strings.TrimRight(in.line, "\r\n")
	if len(s.questions) > 0 && (in.eof || !strings.HasPrefix(line, "/") || strings.HasPrefix(line, "//")) {
		if strings.HasPrefix(in.line, "//") {
			in.line = in.line[1:] // "//TEXT" answers "/TEXT"
		}
		err := s.answer(in)
		s.refreshPrompt()
		return false, err
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
	s.sendPrompt(trimmed)
	return false, nil
}

// sendPrompt sends text and the attached images as a prompt, a follow-up
// while a turn runs.
func (s *attachSession) sendPrompt(text string) {
	prompt := &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: s.agentID}, Message: text, Images: s.takeImages()}
	if s.busy() {
		prompt.StreamingBehavior = protocol.BehaviorFollowUp
		s.scr.line(s.p.dim("(queued after the turn in flight)"))
	}
	if s.command(prompt) {
		s.sent = true
	}
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
		if s.command(&protocol.Steer{Header: h(protocol.TypeSteer), Message: arg, Images: s.takeImages()}) {
			s.sent = true
		}
	case "/image":
		s.attachImage(arg)
	case "/send":
		if len(s.images) == 0 {
			s.scr.line("no image attached; usage: /image PATH, then /send (or a prompt)")
			break
		}
		s.sendPrompt("")
	case "/mode":
		if arg == "" {
			s.scr.line(fmt.Sprintf("mode is %s; usage: /mode NAME", orDash(s.mode)))
			break
		}
		s.command(&protocol.SetMode{Header: h(protocol.TypeSetMode), Mode: arg})
	case "/model":
		if arg == "" {
			s.command(&protocol.ListModels{Header: h(protocol.TypeListModels)})
			break
		}
		s.command(&protocol.SetModel{Header: h(protocol.TypeSetModel), Model: arg})
	case "/reasoning":
		// The level is set for the model list_reasoning_levels names as
		// active: set_reasoning_level wants its descriptor id.
		s.effort = arg
		s.command(&protocol.ListReasoningLevels{Header: h(protocol.TypeListReasoningLevels)})
	case "/compact":
		op := &protocol.SessionOp{Header: h(protocol.TypeSessionOp), Op: protocol.SessionOpCompact}
		if arg != "" {
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || n <= 0 {
				s.scr.line("usage: /compact [TOKENS] (a positive number of recent tokens to keep)")
				break
			}
			op.Args = &protocol.SessionOpArgs{KeepRecentTokens: &n}
		}
		s.command(op)
	case "/fork":
		if arg == "" {
			// The session's last entry, as the runtime names it.
			s.forkHead = true
			s.command(&protocol.SessionOp{Header: h(protocol.TypeSessionOp), Op: protocol.SessionOpList})
			break
		}
		s.command(&protocol.SessionOp{Header: h(protocol.TypeSessionOp), Op: protocol.SessionOpFork,
			Args: &protocol.SessionOpArgs{FromEntryID: arg}})
	case "/sessions":
		s.command(&protocol.SessionOp{Header: h(protocol.TypeSessionOp), Op: protocol.SessionOpList})
	default:
		s.scr.line(fmt.Sprintf("unknown command %s; /help lists them (//%s sends it as a prompt)", name, name[1:]))
	}
	return false, nil
}

// showModels prints a list_models answer: every model the agent may
// switch to, whichever provider serves it, the active one marked.
func (s *attachSession) showModels(data []byte) {
	var lm struct {
		Models []protocol.ModelDescriptor `json:"models"`
		Active protocol.ModelDescriptor   `json:"active"`
	}
	if err := json.Unmarshal(data, &lm); err != nil {
		s.scr.line(s.p.red("list_models: " + err.Error()))
		return
	}
	for _, m := range lm.Models {
		mark := "  "
		if m.ID == lm.Active.ID {
			mark = "* "
		}
		s.scr.line(mark + safe(m.ID))
	}
	s.scr.line(s.p.dim("usage: /model NAME (a name or one of the ids above)"))
	s.refreshPrompt()
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
			resp, err := s.conn.Request(s.ctx, cmd)
			select {
			case s.results <- commandResult{cmd: cmd, resp: resp, err: err}:
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
		if _, ok := r.cmd.(*protocol.ListModels); ok && r.resp != nil {
			s.showModels(r.resp.Data)
		}
		s.succeeded(r)
		return
	}
	switch c := r.cmd.(type) {
	case *protocol.ListReasoningLevels:
		s.effort = ""
	case *protocol.SessionOp:
		if c.Op == protocol.SessionOpList {
			s.forkHead = false
		}
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

// attachImage runs /image: attach the image file at arg to the next
// prompt or /steer, list the attached ones (no arg), or drop them
// ("clear"). A file that cannot go (not an image, over the limit) is
// refused here, before anything is sent.
func (s *attachSession) attachImage(arg string) {
	switch {
	case arg == "":
		if len(s.imagePaths) == 0 {
			s.scr.line("no image attached; usage: /image PATH")
		}
		for i, n := range s.imagePaths {
			s.scr.line(fmt.Sprintf("image %d: %s", i+1, safe(n)))
		}
		return
	case arg == "clear":
		s.takeImages()
		s.scr.line("images dropped")
		return
	case len(s.images) >= protocol.MaxImages:
		s.scr.line(s.p.red(fmt.Sprintf("/image: %d images already, limit %d", len(s.images), protocol.MaxImages)))
		return
	}
	im, err := readImage(arg)
	if err != nil {
		s.scr.line(s.p.red("/image: " + safe(err.Error())))
		return
	}
	s.images = append(s.images, im)
	s.imagePaths = append(s.imagePaths, arg)
	s.scr.line(s.p.dim(fmt.Sprintf("image %d attached (%s); it goes with the next prompt, /steer or /send", len(s.images), safe(arg))))
}
