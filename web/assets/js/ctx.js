// The store as a Preact context, for views drawn deep inside others (a job
// card inside a tool result) that follow the store's state on their own
// instead of having it passed down through every view between.

import { createContext } from "../vendor/preact.mjs";
import { useContext, useEffect, useState } from "../vendor/hooks.mjs";

/** The page's store; app.js provides it. */
export const StoreCtx = createContext(null);

/** useStoreState returns the store and its state, re-rendering on change. */
export function useStoreState() {
  const store = useContext(StoreCtx);
  const [s, set] = useState(store ? store.state : null);
  useEffect(() => (store ? store.subscribe(set) : undefined), [store]);
  return [store, s];
}
