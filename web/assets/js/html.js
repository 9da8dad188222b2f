// htm bound to Preact's h: tagged templates instead of JSX, so the page
// needs no build step.

import { h } from "../vendor/preact.mjs";
import htm from "../vendor/htm.mjs";

export const html = htm.bind(h);
