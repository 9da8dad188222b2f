package wire

// Each message's MarshalJSON encodes its payload through a method-less copy
// of its type (so it does not recurse), turns the required lists it holds
// directly into [] when nil, and adds the envelope.

// MarshalJSON encodes the whole snapshot message.
func (m Snapshot) MarshalJSON() ([]byte, error) {
	type plain Snapshot
	p := plain(m)
	p.Agents = nonNil(p.Agents)
	p.Tasks = nonNil(p.Tasks)
	p.Decisions = nonNil(p.Decisions)
	p.Repos = nonNil(p.Repos)
	p.Memory = nonNil(p.Memory)
	p.Goals = nonNil(p.Goals)
	p.Feed = nonNil(p.Feed)
	p.Logs = nonNil(p.Logs)
	return envelope(TypeSnapshot, p)
}

// MarshalJSON encodes the whole agent.upsert message.
func (m AgentUpsert) MarshalJSON() ([]byte, error) {
	type plain AgentUpsert
	return envelope(TypeAgentUpsert, plain(m))
}

// MarshalJSON encodes the whole agent.log message.
func (m AgentLog) MarshalJSON() ([]byte, error) {
	type plain AgentLog
	p := plain(m)
	p.Entries = nonNil(p.Entries)
	return envelope(TypeAgentLog, p)
}

// MarshalJSON encodes the whole agent.say message.
func (m AgentSay) MarshalJSON() ([]byte, error) {
	type plain AgentSay
	return envelope(TypeAgentSay, plain(m))
}

// MarshalJSON encodes the whole task.upsert message.
func (m TaskUpsert) MarshalJSON() ([]byte, error) {
	type plain TaskUpsert
	return envelope(TypeTaskUpsert, plain(m))
}

// MarshalJSON encodes the whole decision.upsert message.
func (m DecisionUpsert) MarshalJSON() ([]byte, error) {
	type plain DecisionUpsert
	return envelope(TypeDecisionUpsert, plain(m))
}

// MarshalJSON encodes the whole repo.upsert message.
func (m RepoUpsert) MarshalJSON() ([]byte, error) {
	type plain RepoUpsert
	return envelope(TypeRepoUpsert, plain(m))
}

// MarshalJSON encodes the whole memory.upsert message.
func (m MemoryUpsert) MarshalJSON() ([]byte, error) {
	type plain MemoryUpsert
	return envelope(TypeMemoryUpsert, plain(m))
}

// MarshalJSON encodes the whole goal.upsert message.
func (m GoalUpsert) MarshalJSON() ([]byte, error) {
	type plain GoalUpsert
	return envelope(TypeGoalUpsert, plain(m))
}

// MarshalJSON encodes the whole feed.add message.
func (m FeedAdd) MarshalJSON() ([]byte, error) {
	type plain FeedAdd
	return envelope(TypeFeedAdd, plain(m))
}

// MarshalJSON encodes the whole diff message.
func (m Diff) MarshalJSON() ([]byte, error) {
	type plain Diff
	p := plain(m)
	p.Files = nonNil(p.Files)
	return envelope(TypeDiff, p)
}

// MarshalJSON encodes the whole notify message.
func (m Notify) MarshalJSON() ([]byte, error) {
	type plain Notify
	return envelope(TypeNotify, plain(m))
}

// MarshalJSON encodes the whole foreman.status message.
func (m ForemanStatusMsg) MarshalJSON() ([]byte, error) {
	type plain ForemanStatusMsg
	return envelope(TypeForemanStatus, plain(m))
}

// MarshalJSON encodes the whole ack message.
func (m Ack) MarshalJSON() ([]byte, error) {
	type plain Ack
	return envelope(TypeAck, plain(m))
}

// MarshalJSON encodes the whole error message.
func (m Error) MarshalJSON() ([]byte, error) {
	type plain Error
	return envelope(TypeError, plain(m))
}

// MarshalJSON encodes the whole hello message.
func (m Hello) MarshalJSON() ([]byte, error) {
	type plain Hello
	return envelope(TypeHello, plain(m))
}

// MarshalJSON encodes the whole goal.submit message.
func (m GoalSubmit) MarshalJSON() ([]byte, error) {
	type plain GoalSubmit
	return envelope(TypeGoalSubmit, plain(m))
}

// MarshalJSON encodes the whole user.message message.
func (m UserMessage) MarshalJSON() ([]byte, error) {
	type plain UserMessage
	return envelope(TypeUserMessage, plain(m))
}

// MarshalJSON encodes the whole decision.answer message.
func (m DecisionAnswerMsg) MarshalJSON() ([]byte, error) {
	type plain DecisionAnswerMsg
	return envelope(TypeDecisionAnswer, plain(m))
}

// MarshalJSON encodes the whole task.action message.
func (m TaskActionMsg) MarshalJSON() ([]byte, error) {
	type plain TaskActionMsg
	return envelope(TypeTaskAction, plain(m))
}

// MarshalJSON encodes the whole agent.action message.
func (m AgentActionMsg) MarshalJSON() ([]byte, error) {
	type plain AgentActionMsg
	return envelope(TypeAgentAction, plain(m))
}

// MarshalJSON encodes the whole diff.request message.
func (m DiffRequest) MarshalJSON() ([]byte, error) {
	type plain DiffRequest
	return envelope(TypeDiffRequest, plain(m))
}

// MarshalJSON encodes the whole repo.add message.
func (m RepoAdd) MarshalJSON() ([]byte, error) {
	type plain RepoAdd
	return envelope(TypeRepoAdd, plain(m))
}

// MessageType returns TypeSnapshot.
func (Snapshot) MessageType() Type { return TypeSnapshot }

// MessageType returns TypeAgentUpsert.
func (AgentUpsert) MessageType() Type { return TypeAgentUpsert }

// MessageType returns TypeAgentLog.
func (AgentLog) MessageType() Type { return TypeAgentLog }

// MessageType returns TypeAgentSay.
func (AgentSay) MessageType() Type { return TypeAgentSay }

// MessageType returns TypeTaskUpsert.
func (TaskUpsert) MessageType() Type { return TypeTaskUpsert }

// MessageType returns TypeDecisionUpsert.
func (DecisionUpsert) MessageType() Type { return TypeDecisionUpsert }

// MessageType returns TypeRepoUpsert.
func (RepoUpsert) MessageType() Type { return TypeRepoUpsert }

// MessageType returns TypeMemoryUpsert.
func (MemoryUpsert) MessageType() Type { return TypeMemoryUpsert }

// MessageType returns TypeGoalUpsert.
func (GoalUpsert) MessageType() Type { return TypeGoalUpsert }

// MessageType returns TypeFeedAdd.
func (FeedAdd) MessageType() Type { return TypeFeedAdd }

// MessageType returns TypeDiff.
func (Diff) MessageType() Type { return TypeDiff }

// MessageType returns TypeNotify.
func (Notify) MessageType() Type { return TypeNotify }

// MessageType returns TypeForemanStatus.
func (ForemanStatusMsg) MessageType() Type { return TypeForemanStatus }

// MessageType returns TypeAck.
func (Ack) MessageType() Type { return TypeAck }

// MessageType returns TypeError.
func (Error) MessageType() Type { return TypeError }

// MessageType returns TypeHello.
func (Hello) MessageType() Type { return TypeHello }

// MessageType returns TypeGoalSubmit.
func (GoalSubmit) MessageType() Type { return TypeGoalSubmit }

// MessageType returns TypeUserMessage.
func (UserMessage) MessageType() Type { return TypeUserMessage }

// MessageType returns TypeDecisionAnswer.
func (DecisionAnswerMsg) MessageType() Type { return TypeDecisionAnswer }

// MessageType returns TypeTaskAction.
func (TaskActionMsg) MessageType() Type { return TypeTaskAction }

// MessageType returns TypeAgentAction.
func (AgentActionMsg) MessageType() Type { return TypeAgentAction }

// MessageType returns TypeDiffRequest.
func (DiffRequest) MessageType() Type { return TypeDiffRequest }

// MessageType returns TypeRepoAdd.
func (RepoAdd) MessageType() Type { return TypeRepoAdd }

func (Snapshot) isServer()         {}
func (AgentUpsert) isServer()      {}
func (AgentLog) isServer()         {}
func (AgentSay) isServer()         {}
func (TaskUpsert) isServer()       {}
func (DecisionUpsert) isServer()   {}
func (RepoUpsert) isServer()       {}
func (MemoryUpsert) isServer()     {}
func (GoalUpsert) isServer()       {}
func (FeedAdd) isServer()          {}
func (Diff) isServer()             {}
func (Notify) isServer()           {}
func (ForemanStatusMsg) isServer() {}
func (Ack) isServer()              {}
func (Error) isServer()            {}

func (Hello) isClient()             {}
func (GoalSubmit) isClient()        {}
func (UserMessage) isClient()       {}
func (DecisionAnswerMsg) isClient() {}
func (TaskActionMsg) isClient()     {}
func (AgentActionMsg) isClient()    {}
func (DiffRequest) isClient()       {}
func (RepoAdd) isClient()           {}

// CorrelationID returns the message's id.
func (m Hello) CorrelationID() string { return m.ID }

// CorrelationID returns the message's id.
func (m GoalSubmit) CorrelationID() string { return m.ID }

// CorrelationID returns the message's id.
func (m UserMessage) CorrelationID() string { return m.ID }

// CorrelationID returns the message's id.
func (m DecisionAnswerMsg) CorrelationID() string { return m.ID }

// CorrelationID returns the message's id.
func (m TaskActionMsg) CorrelationID() string { return m.ID }

// CorrelationID returns the message's id.
func (m AgentActionMsg) CorrelationID() string { return m.ID }

// CorrelationID returns the message's id.
func (m DiffRequest) CorrelationID() string { return m.ID }

// CorrelationID returns the message's id.
func (m RepoAdd) CorrelationID() string { return m.ID }
