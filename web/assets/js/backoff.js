// Reconnect backoff of docs/protocol.md §2.2: 1 s, 2 s, 4 s, … capped at 30 s.

/** The delay in ms before reconnect attempt n (0 is the first retry). */
export function backoffDelay(n) {
  if (!(n >= 0)) n = 0;
  return Math.min(30000, 1000 * Math.pow(2, Math.min(n, 15)));
}
