// A small, pure syntax tokenizer for diffs and code: strings, comments,
// numbers and keywords for the languages agents edit most, chosen by the
// file's extension. It is line-at-a-time (a diff shows lines out of their
// file, so a block comment or string that spans lines is not followed) and
// never fails: an unknown language is one plain token. Tokens are text
// spans with a class, rendered as text nodes — never as HTML.

const kw = (s) => new Set(s.split(" "));

const langs = {
  go: { line: "//", kw: kw("break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false iota") },
  js: { line: "//", kw: kw("async await break case catch class const continue default delete do else export extends false finally for function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield") },
  py: { line: "#", kw: kw("and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield") },
  rs: { line: "//", kw: kw("as async await break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while") },
  sh: { line: "#", kw: kw("case do done elif else esac fi for function if in then until while export local return") },
  c: { line: "//", kw: kw("auto break case char const continue default do double else enum extern float for goto if int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class namespace template public private protected new delete true false nullptr") },
};
const byExt = { go: "go", js: "js", mjs: "js", cjs: "js", ts: "js", tsx: "js", jsx: "js", py: "py", rs: "rs", sh: "sh", bash: "sh", c: "c", h: "c", cc: "c", cpp: "c", hpp: "c", java: "c" };

/** The language of a path ("go", "js", …), or "" when not known. */
export function langOf(path) {
  const m = /\.([A-Za-z0-9]+)$/.exec(path || "");
  return (m && byExt[m[1].toLowerCase()]) || "";
}

/**
 * Splits one line of code into tokens {t, c}: c is "" (plain), "kw",
 * "str", "num" or "com". Joining every t gives the line back.
 */
export function tokenize(line, lang) {
  const L = langs[lang];
  if (!L || !line) return [{ t: line || "", c: "" }];
  const out = [];
  const push = (t, c) => {
    if (!t) return;
    const last = out[out.length - 1];
    if (last && last.c === c) last.t += t; else out.push({ t, c });
  };
  let i = 0;
  while (i < line.length) {
    const ch = line[i];
    if (line.startsWith(L.line, i)) { push(line.slice(i), "com"); break; }
    if (L.line === "//" && line.startsWith("/*", i)) {
      const end = line.indexOf("*/", i + 2);
      const j = end < 0 ? line.length : end + 2;
      push(line.slice(i, j), "com"); i = j; continue;
    }
    if (ch === '"' || ch === "'" || ch === "`") {
      let j = i + 1;
      while (j < line.length && line[j] !== ch) j += line[j] === "\\" ? 2 : 1;
      j = Math.min(j + 1, line.length);
      push(line.slice(i, j), "str"); i = j; continue;
    }
    if (/[0-9]/.test(ch) && !/[A-Za-z0-9_]/.test(line[i - 1] || "")) {
      const m = /^(0[xX][0-9a-fA-F_]+|[0-9][0-9_]*(\.[0-9_]+)?([eE][+-]?[0-9]+)?)/.exec(line.slice(i));
      push(m[0], "num"); i += m[0].length; continue;
    }
    if (/[A-Za-z_]/.test(ch)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(line.slice(i));
      push(m[0], L.kw.has(m[0]) ? "kw" : ""); i += m[0].length; continue;
    }
    push(ch, ""); i++;
  }
  return out;
}
