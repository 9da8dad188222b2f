package refagent

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"
)

// idGen mints opaque prefixed ids such as "msg-m1x2y3z-a1b2c3-7". The
// middle part is fixed per process (start time in base 36 plus random
// bytes), so ids are unique within a process by the counter and across
// restarts by the nonce — a restored live window never collides with new
// messages. It is safe for concurrent use.
type idGen struct {
	nonce string
	n     atomic.Uint64
}

func newIDGen() *idGen {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return &idGen{nonce: strconv.FormatInt(time.Now().UnixMilli(), 36) + "-" + hex.EncodeToString(b[:])}
}

// next returns a fresh id with the given prefix.
func (g *idGen) next(prefix string) string {
	return prefix + "-" + g.nonce + "-" + strconv.FormatUint(g.n.Add(1), 10)
}
