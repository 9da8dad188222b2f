package records

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/shard-dev/shard/internal/clock"
)

// Bucket names. Each is a KV bucket (a stream KV_<name>) of one record
// kind.
const (
	BucketAgents  = "shard_agents"  // key agent_id: AgentEntry (the agent directory)
	BucketJobs    = "shard_jobs"    // key job_id: JobRecord
	BucketRuns    = "shard_runs"    // key <job_id>.<run_id>: RunRecord
	BucketAliases = "shard_aliases" // key <parent_agent_id>.<base64url alias>: AliasEntry
	BucketClaims  = "shard_claims"  // key <job_id>.<run_id>: ClaimEntry, while claimable
)

// Defaults of Options.
const (
	DefaultReplicas       = 3
	DefaultHistory        = 5
	DefaultTimeout        = 10 * time.Second
	DefaultAttemptTimeout = 2 * time.Second
	DefaultRetryWait      = 100 * time.Millisecond
	DefaultLease          = 30 * time.Second
	DefaultWatchBuffer    = 256
)

// Options configures Open. The zero value is the production setting for
// a three-node cluster.
type Options struct {
	// Replicas is how many servers keep each bucket (default 3). A write
	// is acknowledged once a majority stored it, so 3 replicas keep
	// taking writes with one server lost. 2 is refused: a majority of two
	// is both, so an R2 bucket stops with either server gone and is worse
	// than one replica. 1 is for a one-server cluster (and tests).
	Replicas int
	// History is how many revisions a key keeps (default 5, at least 1).
	// Compare-and-set needs only the last; the few before it let a person
	// see what a record went through after a surprise.
	History uint8
	// Timeout bounds each operation (default 10s): a node cut off from the
	// majority gets ErrUnavailable after it rather than waiting forever.
	Timeout time.Duration
	// AttemptTimeout bounds one attempt of a write before it is sent again
	// under the same message id (default 2s; see Table.write).
	AttemptTimeout time.Duration
	// RetryWait is the pause between attempts (default 100ms): enough for
	// a stream to elect a leader without spinning.
	RetryWait time.Duration
	// Lease is how long a claim holds a run before its node must renew it
	// (default 30s); Claim writes now+Lease into the run.
	Lease time.Duration
	// WatchBuffer is how many changes a Watch channel holds (default 256).
	WatchBuffer int
	// Now is the clock (default time.Now), injected so tests can fix
	// what claims and interruptions record.
	Now func() time.Time
}

// withDefaults returns a copy of o with every zero field defaulted, or
// an error for a value the layer refuses.
func (o Options) withDefaults() (Options, error) {
	o.Replicas = cmp.Or(o.Replicas, DefaultReplicas)
	o.History = cmp.Or(o.History, DefaultHistory)
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.AttemptTimeout = cmp.Or(o.AttemptTimeout, DefaultAttemptTimeout)
	o.RetryWait = cmp.Or(o.RetryWait, DefaultRetryWait)
	o.Lease = cmp.Or(o.Lease, DefaultLease)
	o.WatchBuffer = cmp.Or(o.WatchBuffer, DefaultWatchBuffer)
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.Replicas == 2 || o.Replicas < 1 || o.Replicas > 5:
		return o, fmt.Errorf("%w: replicas %d: use 1 (one server), 3 or 5", ErrInvalid, o.Replicas)
	case o.History > jetstream.KeyValueMaxHistory:
		return o, fmt.Errorf("%w: history %d exceeds %d", ErrInvalid, o.History, jetstream.KeyValueMaxHistory)
	case o.Timeout < 0 || o.AttemptTimeout < 0 || o.RetryWait < 0 || o.Lease < 0 || o.WatchBuffer < 0:
		return o, fmt.Errorf("%w: negative option", ErrInvalid)
	}
	return o, nil
}

// Records is the cluster's replicated record layer: one Table per bucket.
// It holds no state of its own beyond the handles, so every node opens
// its own over its own connection and they agree through the buckets.
type Records struct {
	Agents  *Table[AgentEntry]
	Jobs    *Table[JobRecord]
	Runs    *Table[RunRecord]
	Aliases *Table[AliasEntry]
	Claims  *Table[ClaimEntry]

	opts Options
}

// Open creates the buckets, or binds them when another node did, over js
// (a connection to any server of the cluster). It needs a JetStream
// meta-leader: before the cluster elected one it fails with
// ErrUnavailable when ctx (or Options.Timeout) ends.
//
// The servers must run JetStream with sync_interval "always": a write is
// acknowledged once a majority stored it, and a server that acknowledges
// before it fsyncs (the default is every two minutes) can lose an
// acknowledged write when it and another lose power together. That is
// the servers' configuration (package cluster); this layer cannot check
// it from a client.
func Open(ctx context.Context, js jetstream.JetStream, opts Options) (*Records, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Records{opts: o}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout*3)
	defer cancel()
	if r.Agents, err = openTable[AgentEntry](ctx, js, BucketAgents, "Shard agent directory: agent_id -> host node", &r.opts); err != nil {
		return nil, err
	}
	if r.Jobs, err = openTable[JobRecord](ctx, js, BucketJobs, "Shard subagent jobs", &r.opts); err != nil {
		return nil, err
	}
	if r.Runs, err = openTable[RunRecord](ctx, js, BucketRuns, "Shard subagent runs: job_id.run_id", &r.opts); err != nil {
		return nil, err
	}
	if r.Aliases, err = openTable[AliasEntry](ctx, js, BucketAliases, "Shard aliases: parent.alias -> agent_id", &r.opts); err != nil {
		return nil, err
	}
	if r.Claims, err = openTable[ClaimEntry](ctx, js, BucketClaims, "Shard claim queue: runs any node may take", &r.opts); err != nil {
		return nil, err
	}
	return r, nil
}

// openTable creates or binds one bucket, retrying while the cluster has
// no meta-leader yet or another node is creating the same bucket.
//
// The bucket's stream is the KV convention's (subjects $KV.<name>.>, one
// stream message per revision, delete markers, a two-minute duplicate
// window) with one difference: direct gets are off. A direct get may be
// answered by any replica, one that has not yet applied the last
// acknowledged write, where a get through the stream leader sees it. The
// layer decides on what it reads (compare-and-set), so a stale read would
// only cost a conflict, but a read that misses an acknowledged write
// would surprise every caller that just wrote.
func openTable[T Record](ctx context.Context, js jetstream.JetStream, name, desc string, o *Options) (*Table[T], error) {
	cfg := jetstream.StreamConfig{
		Name:              "KV_" + name,
		Description:       desc,
		Subjects:          []string{"$KV." + name + ".>"},
		MaxMsgsPerSubject: int64(o.History),
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		Storage:           jetstream.FileStorage,
		Replicas:          o.Replicas,
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        2 * time.Minute,
		Discard:           jetstream.DiscardNew,
		AllowDirect:       false,
	}
	for {
		t, err := bindTable[T](ctx, js, name, cfg, o)
		if err == nil || errors.Is(err, ErrInvalid) {
			return t, err
		}
		if !clock.Sleep(ctx, o.RetryWait) {
			return nil, fail(ErrUnavailable, err, "open bucket %s", name)
		}
	}
}

// bindTable makes one attempt of openTable: bind the stream, or create
// it when it does not exist. Binding first means nodes opening at once
// never rewrite each other's configuration.
func bindTable[T Record](ctx context.Context, js jetstream.JetStream, name string, cfg jetstream.StreamConfig, o *Options) (*Table[T], error) {
	actx, cancel := context.WithTimeout(ctx, o.AttemptTimeout)
	defer cancel()
	stream, err := js.Stream(actx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		stream, err = js.CreateStream(actx, cfg)
	}
	if err != nil {
		return nil, err
	}
	info := stream.CachedInfo()
	if info.Config.Replicas != o.Replicas {
		return nil, fail(ErrInvalid, nil, "open bucket %s: it has %d replicas, this node asks for %d", name, info.Config.Replicas, o.Replicas)
	}
	if info.Config.AllowDirect {
		return nil, fail(ErrInvalid, nil, "open bucket %s: direct gets are on (made by something else than this layer)", name)
	}
	kv, err := js.KeyValue(actx, name)
	if err != nil {
		return nil, err
	}
	return &Table[T]{bucket: name, kv: kv, js: js, stream: stream, subj: "$KV." + name + ".", opts: o}, nil
}
