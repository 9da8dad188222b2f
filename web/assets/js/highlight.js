// Highlighted code as Preact nodes: the tokens of js/syntax.js as text in
// classed spans (never HTML), for diff lines and code descriptors.

import { html } from "./html.js";
import { tokenize } from "./syntax.js";

/** One line of code, tokenized for lang ("" → plain text). */
export function hl(line, lang) {
  if (!lang) return line;
  return tokenize(line, lang).map((k) => (k.c ? html`<span class=${"tk-" + k.c}>${k.t}</span>` : k.t));
}

/** A block of code: each line highlighted, newlines kept. */
export function hlBlock(text, lang) {
  if (!lang) return text;
  const out = [];
  (text || "").split("\n").forEach((line, i) => {
    if (i > 0) out.push("\n");
    out.push(hl(line, lang));
  });
  return out;
}
