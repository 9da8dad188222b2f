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
  // Catch up as it subscribes: the store may have changed between the
  // first render and this effect (see app.js useStore).
  useEffect(() => {
    if (!store) return undefined;
    const off = store.subscribe(set);
    set(store.state);
    return off;
  }, [store]);
  return [store, s];
}
