package jobs

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// reportDelivery is the coordinator's completion reports in flight.
type reportDelivery struct {
	// inFlight: run id whose report is being injected → its terminal time
	// (ms), for the delivery-latency metric.
	inFlight map[string]int64
	// retry is the pending retry of undelivered reports; one at most, as a
	// retry delivers every report still in the store.
	retry clock.Timer
}

func (rd *reportDelivery) stopRetry() {
	if rd.retry != nil {
		rd.retry.Stop()
		rd.retry = nil
	}
}

// deliverPending delivers every report still in the store (at startup, and
// on each retry).
func (co *Coordinator) deliverPending(c actor.Context) {
	reports, err := co.deps.Store.Reports()
	if err != nil {
		co.deps.Logger.Error("jobs: list reports", "err", err)
		return
	}
	for _, r := range reports {
		co.deliver(c, r)
	}
}

// deliver injects a completion report into the parent: steer into an
// active turn, prompt otherwise (restoring its runtime). The report stays
// in the store until the parent's runtime accepted it.
func (co *Coordinator) deliver(c actor.Context, r store.Report) {
	if _, ok := co.reports.inFlight[r.RunID]; ok {
		return
	}
	co.reports.inFlight[r.RunID] = r.CreatedAt
	c.Request(co.deps.Registry, &agent.Route{AgentID: r.ParentAgentID, Msg: &agent.Inject{Key: r.RunID, Text: ReportText(r)}})
}

// onInjected ends a delivery: the report is forgotten once accepted, and
// retried later otherwise.
func (co *Coordinator) onInjected(m *agent.Injected) {
	endedAt, known := co.reports.inFlight[m.Key]
	delete(co.reports.inFlight, m.Key)
	if m.Err != nil {
		co.deps.Logger.Warn("completion report not delivered; will retry", "run_id", m.Key, "err", m.Err)
		if co.reports.retry == nil {
			co.reports.retry = co.after(co.deps.Limits.ReportRetry, &retryReports{})
		}
		return
	}
	if known && endedAt != 0 {
		co.deps.Metrics.ObserveReportDelivery(co.deps.Clock.Now().Sub(time.UnixMilli(endedAt)))
	}
	st, log := co.deps.Store, co.deps.Logger
	// Refused only once the daemon is stopping: the report stays and is
	// delivered again at the next start (delivery is at least once).
	co.deps.Group.Go(func() {
		if err := st.DeleteReport(m.Key); err != nil {
			log.Error("jobs: forget delivered report", "run_id", m.Key, "err", err)
		}
	})
}

// ReportText is the completion report a parent's model receives. It names
// the run and its outcome, an isolated run's workspace (id, branch,
// worktree) and its diff stat when the run ended, and carries the child's
// final text; it never repeats the task.
func ReportText(r store.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[subagent report] run %s of job %s (%s, agent %s", r.RunID, r.JobID, r.Name, r.AgentID)
	if r.Alias != "" {
		fmt.Fprintf(&b, ", alias %s", r.Alias)
	}
	fmt.Fprintf(&b, ") ended: %s.", r.State)
	if ws := r.Workspace; ws != nil {
		// Isolated run: where its work is, and how much of it there is.
		fmt.Fprintf(&b, "\nworkspace: %s (branch %s, cwd %s)", ws.WorkspaceID, ws.Branch, ws.Cwd)
		if d := ws.DiffStat; d != nil {
			fmt.Fprintf(&b, "\ndiff: %d file(s) changed, +%d -%d", d.Files, d.Additions, d.Deletions)
		} else {
			b.WriteString("\ndiff: not measured")
		}
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "\nerror: %s", r.Error)
	}
	if r.FinalText != "" {
		b.WriteString("\nfinal text:\n")
		b.WriteString(fitText(r.FinalText, protocol.MaxTextLen-b.Len()))
	}
	return b.String()
}

// fitText cuts text to at most budget bytes, at a rune boundary, ending in
// a note of what was cut. A report is delivered as a prompt, and the
// runtime refuses a prompt over protocol.MaxTextLen: an undeliverable
// report would be retried forever.
func fitText(text string, budget int) string {
	if len(text) <= budget {
		return text
	}
	const note = "\n[… %d bytes of final text cut]"
	// The count cut is below len(text), so its note is no longer than this.
	keep := max(0, budget-len(fmt.Sprintf(note, len(text))))
	for keep > 0 && !utf8.RuneStart(text[keep]) {
		keep--
	}
	return text[:keep] + fmt.Sprintf(note, len(text)-keep)
}
