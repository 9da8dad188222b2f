package outbox

import "sync"

// Hub is the set of live connections' Outboxes, for events that go to every
// connection (agent_spawned, agent_activity, …). It is safe for concurrent
// use.
type Hub struct {
	// mu protects set.
	mu  sync.RWMutex
	set map[*Outbox]struct{}
}

// NewHub returns an empty Hub.
func NewHub() *Hub { return &Hub{set: make(map[*Outbox]struct{})} }

// Add registers o.
func (h *Hub) Add(o *Outbox) {
	h.mu.Lock()
	h.set[o] = struct{}{}
	h.mu.Unlock()
}

// Remove unregisters o.
func (h *Hub) Remove(o *Outbox) {
	h.mu.Lock()
	delete(h.set, o)
	h.mu.Unlock()
}

// Len returns the number of registered connections.
func (h *Hub) Len() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.set)
}

// Broadcast pushes rec to every registered Outbox. A slow consumer is
// dropped by its own Outbox; Broadcast never blocks on one.
func (h *Hub) Broadcast(rec []byte) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for o := range h.set {
		o.Push(rec)
	}
}
