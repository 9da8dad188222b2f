package attend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shard-dev/shard/protocol"
)

// Prompt sends the agent a user message (docs/protocol.md §9.2): it starts
// a turn when the agent is idle, and runs after the current one otherwise
// (streaming_behavior follow_up). It returns once the runtime accepted or
// queued it; the turn's course is the agent's events.
func (w *Watcher) Prompt(ctx context.Context, text string) error {
	return w.drive(ctx, &protocol.Prompt{
		Header:  protocol.Header{Type: protocol.TypePrompt, AgentID: w.opts.AgentID},
		Message: text, StreamingBehavior: protocol.BehaviorFollowUp,
	})
}

// Steer sends the agent a message for the turn in flight, delivered before
// its next model call (docs/protocol.md §9.2); with no turn running it
// starts one.
func (w *Watcher) Steer(ctx context.Context, text string) error {
	return w.drive(ctx, &protocol.Steer{
		Header:  protocol.Header{Type: protocol.TypeSteer, AgentID: w.opts.AgentID},
		Message: text,
	})
}

// drive sends a drive command over the link and waits for its response.
func (w *Watcher) drive(ctx context.Context, cmd protocol.Typed) error {
	lk, err := w.ready(ctx)
	if err != nil {
		return err
	}
	_, err = lk.conn.Request(ctx, cmd)
	return w.commandErr(lk, cmd.Head().Type, err)
}

// AnswerPermission answers an open permission request (the agent's or a
// descendant's) with option: protocol.OptionAllowOnce, OptionAlwaysAllow
// or OptionDeny (a legacy decision, or the id of one of the request's
// choices, is taken too). When the request offers choices the answer is a
// choice_id (the choice of that id, else the first of its intent),
// otherwise a legacy decision (docs/protocol.md §9.5). reason is the
// person's word with it, told the model with a refusal.
//
// It returns once the request is resolved: nil when this answer won, an
// *AnsweredError (CONFLICT) when another answer or the headless policy was
// first, INVALID_REQUEST for an option the request does not offer,
// NOT_FOUND (ErrUnknownRequest) for a request the Watcher does not know,
// ErrDetached when the connection was lost before the outcome was known.
func (w *Watcher) AnswerPermission(ctx context.Context, requestID, option, reason string) error {
	return w.answer(ctx, requestID, KindPermission, "", func(o *openRequest) (protocol.Typed, *sentAnswer, error) {
		if o.perm == nil {
			return nil, nil, invalid("request %s has no permission record", requestID)
		}
		choiceID, decision, err := permissionAnswer(o.perm, option)
		if err != nil {
			return nil, nil, err
		}
		return &protocol.PermissionResponse{
			Header:    protocol.Header{Type: protocol.TypePermissionResponse, AgentID: o.req.AgentID},
			RequestID: requestID, ChoiceID: choiceID, Decision: decision, Reason: reason,
		}, &sentAnswer{choiceID: choiceID, decision: decision}, nil
	})
}

// AnswerQuestion answers an open question (a ui_request) with value: a
// select's option (a []string of them for a multiple select), a confirm's
// "yes" or "no" (also "y"/"n", "true"/"false", a bool), an input's or
// editor's text, or nil to dismiss it. It returns as AnswerPermission
// does.
func (w *Watcher) AnswerQuestion(ctx context.Context, requestID string, value any) error {
	return w.AnswerQuestionBy(ctx, requestID, value, "")
}

// AnswerQuestionBy is AnswerQuestion on behalf of by (an agent id): the
// Resolved this answer wins carries it in By, so that whoever records the
// resolution names who answered, whichever of the answer and the
// resolution arrives first.
func (w *Watcher) AnswerQuestionBy(ctx context.Context, requestID string, value any, by string) error {
	return w.answer(ctx, requestID, KindQuestion, by, func(o *openRequest) (protocol.Typed, *sentAnswer, error) {
		v, err := questionValue(o.req, value)
		if err != nil {
			return nil, nil, err
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, nil, invalid("answer to %s: %v", requestID, err)
		}
		return &protocol.UIResponse{
			Header:    protocol.Header{Type: protocol.TypeUIResponse, AgentID: o.req.AgentID},
			RequestID: requestID, Value: raw,
		}, &sentAnswer{value: v}, nil
	})
}

// answer sends the answer build makes for the open request id of kind,
// then waits for the request's resolution and says whether it won.
func (w *Watcher) answer(ctx context.Context, id, kind, by string, build func(*openRequest) (protocol.Typed, *sentAnswer, error)) error {
	lk, err := w.ready(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	o := w.open[id]
	if o == nil {
		err := w.closedLocked(id)
		w.mu.Unlock()
		return err
	}
	if o.req.Kind != kind {
		w.mu.Unlock()
		return invalid("request %s is a %s, not a %s", id, o.req.Kind, kind)
	}
	cmd, sent, err := build(o)
	if err != nil {
		w.mu.Unlock()
		return err
	}
	sent.by = by
	o.sent = sent // before the answer can win: the resolution compares with it
	w.mu.Unlock()

	if _, err := lk.conn.Request(ctx, cmd); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			w.mu.Lock()
			if o.sent == sent {
				o.sent = nil // refused: this answer cannot win
			}
			w.mu.Unlock()
		}
		return w.commandErr(lk, cmd.Head().Type, err)
	}
	select {
	case <-o.done:
	case <-lk.lost:
		select {
		case <-o.done: // resolved just before the loss
		default:
			return fmt.Errorf("%w: the outcome of the answer to %s is unknown", ErrDetached, id)
		}
	case <-ctx.Done():
		return fmt.Errorf("attend: answer %s: %w", id, ctx.Err())
	}
	if o.res.Mine {
		return nil
	}
	return &AnsweredError{Resolved: o.res}
}

// closedLocked is the error for answering id, which is not open: nil when
// this Watcher's answer resolved it (a retry), an *AnsweredError when
// something else did, NOT_FOUND when it was never seen. mu must be held.
func (w *Watcher) closedLocked(id string) error {
	for i := len(w.recent) - 1; i >= 0; i-- {
		if res := w.recent[i]; res.RequestID == id {
			if res.Mine {
				return nil
			}
			return &AnsweredError{Resolved: res}
		}
	}
	return unknownRequest(id)
}

// ready waits until the Watcher is attached and returns the link.
func (w *Watcher) ready(ctx context.Context) (*link, error) {
	for {
		w.mu.Lock()
		lk, linked := w.link, w.linked
		w.mu.Unlock()
		if lk != nil {
			return lk, nil
		}
		select {
		case <-linked:
		case <-w.done:
			return nil, ErrStopped
		case <-ctx.Done():
			return nil, fmt.Errorf("attend: wait for the attachment: %w", ctx.Err())
		}
	}
}

// commandErr is the error of a command typ sent over lk: the daemon's
// refusal as it is (its protocol code), ErrDetached when the connection
// was lost, else the context's error.
func (w *Watcher) commandErr(lk *link, typ string, err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return fmt.Errorf("attend: %s: %w", typ, err)
	}
	if lk.conn.Err() != nil {
		return fmt.Errorf("%w: %s: %w", ErrDetached, typ, err)
	}
	return fmt.Errorf("attend: %s: %w", typ, err)
}
