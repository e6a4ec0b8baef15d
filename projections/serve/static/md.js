// convlog viewer: markdown in text parts, rendered safely.
// The text is parsed here and the page is built with the DOM API (createElement,
// textContent, setAttribute on a fixed list): no string from the log is ever parsed as
// HTML, so a script element, an image with an onerror or an HTML block in an answer shows as
// the text it is. Links keep only http(s) and mailto targets and open in a new tab with
// no referrer; images are never loaded (a link to them is shown instead).
// Code blocks are highlighted by a small tokenizer (comments, strings, numbers,
// keywords of common languages), again as text nodes in spans.
"use strict";
(function () {
  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }

  // ------------------------------------------------------------------ code
  const KEYWORDS = new Set((
    // Python, JavaScript/TypeScript, shell, Go, Rust, C-likes, SQL: the common ones
    "False None True and as assert async await break case catch class const continue def " +
    "default del do elif else enum except export extends false finally fn for from func " +
    "function go if impl import in interface is lambda let loop match mod mut new nil not null " +
    "or package pass pub raise return self static struct super switch this throw true try type " +
    "typeof undefined use var void while with yield fi then done esac echo local " +
    "SELECT FROM WHERE INSERT INTO UPDATE DELETE CREATE TABLE JOIN ON GROUP BY ORDER LIMIT"
  ).split(" "));
  const HASH_COMMENTS = new Set(["python", "py", "sh", "bash", "shell", "zsh", "console",
    "ruby", "rb", "yaml", "yml", "toml", "perl", "r", "makefile", "make", "dockerfile", "ini"]);
  const TOKEN = /(\/\/[^\n]*|\/\*[\s\S]*?\*\/|#[^\n]*|--[^\n]*)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|(\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b|\b0x[\da-f]+\b)|([A-Za-z_$][\w$]*)/gi;

  function highlight(code, lang) {
    const out = document.createDocumentFragment();
    const l = (lang || "").toLowerCase();
    const hash = HASH_COMMENTS.has(l);
    const dashes = l === "sql" || l === "lua" || l === "haskell";
    let at = 0;
    for (const m of code.matchAll(TOKEN)) {
      let cls = "";
      if (m[1] !== undefined) {
        const c = m[1];
        const ok = c.startsWith("#") ? hash : c.startsWith("--") ? dashes : !hash || l === "";
        if (!ok) {
          // not a comment in this language: only its first character is consumed
          continue;
        }
        cls = "tok-c";
      } else if (m[2] !== undefined) cls = "tok-s";
      else if (m[3] !== undefined) cls = "tok-n";
      else if (KEYWORDS.has(m[4])) cls = "tok-k";
      else continue;
      if (m.index > at) out.append(document.createTextNode(code.slice(at, m.index)));
      out.append(el("span", cls, m[0]));
      at = m.index + m[0].length;
    }
    if (at < code.length) out.append(document.createTextNode(code.slice(at)));
    return out;
  }

  // ------------------------------------------------------------------ inline
  const SAFE_URL = /^(https?:\/\/|mailto:)/i;
  // code span | image | link | bold | strike | em | autolink; a delimiter inside a word
  // (snake_case, __dunder__) or after a backslash is text
  const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|!\[([^\]\n]*)\]\(([^()\s]*)\)|\[([^\]\n]+)\]\(([^()\s]*)\)|(?<![\w\\])(\*\*|__)(?=\S)([\s\S]*?\S)\7(?!\w)|~~(?=\S)([\s\S]*?\S)~~|(?<![\w\\*])(\*|_)(?=[^\s*_])([\s\S]*?[^\s*_\\])\10(?![\w*])|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

  function link(href, label) {
    if (!SAFE_URL.test(href)) return null;
    const a = el("a", "md-link");
    a.setAttribute("href", href);
    a.setAttribute("target", "_blank");
    a.setAttribute("rel", "noopener noreferrer nofollow");
    a.title = href;
    a.append(label);
    return a;
  }

  function inline(text, into) {
    let at = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > 0 && text[m.index - 1] === "\\") continue;
      let node = null;
      if (m[1] !== undefined) node = el("code", "md-code", m[2].replace(/^ (.*) $/, "$1"));
      else if (m[3] !== undefined) node = link(m[4], document.createTextNode("image: " + (m[3] || m[4])));
      else if (m[5] !== undefined) {
        const label = document.createDocumentFragment();
        inline(m[5], label);
        node = link(m[6], label);
      } else if (m[7] !== undefined) { node = el("strong"); inline(m[8], node); }
      else if (m[9] !== undefined) { node = el("del"); inline(m[9], node); }
      else if (m[10] !== undefined) { node = el("em"); inline(m[11], node); } else if (m[12] !== undefined) node = link(m[12], document.createTextNode(m[12]));
      if (node === null) continue;  // an unsafe link: left as the text it is
      if (m.index > at) into.append(document.createTextNode(unescape(text.slice(at, m.index))));
      into.append(node);
      at = m.index + m[0].length;
    }
    if (at < text.length) into.append(document.createTextNode(unescape(text.slice(at))));
  }

  function unescape(s) { return s.replace(/\\([\\`*_{}\[\]()#+\-.!~|>])/g, "$1"); }

  // ------------------------------------------------------------------ blocks
  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)[^\n]*$/;
  const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
  const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const QUOTE = /^ {0,3}>\s?(.*)$/;
  const ROW = /^\s*\|(.*)\|\s*$/;
  const DIVIDER = /^\s*\|?(\s*:?-{2,}:?\s*\|)+\s*:?-{0,}:?\s*\|?\s*$/;

  function cells(line) { return line.replace(/^\s*\|/, "").replace(/\|\s*$/, "").split("|").map((c) => c.trim()); }

  function blocks(lines, into) {
    let i = 0;
    let para = [];
    const flush = () => {
      if (!para.length) return;
      const p = el("p");
      para.forEach((line, k) => {
        if (k) p.append(el("br"));
        inline(line, p);
      });
      into.append(p);
      para = [];
    };
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = FENCE.exec(line))) {
        flush();
        const close = m[1];
        const body = [];
        i++;
        while (i < lines.length && !(lines[i].trim().startsWith(close) && lines[i].trim().replace(new RegExp("^" + close[0] + "+"), "") === "")) body.push(lines[i++]);
        i++;
        const pre = el("pre", "md-pre");
        const code = el("code", m[2] ? "lang-" + m[2].toLowerCase() : "");
        if (m[2]) pre.dataset.lang = m[2];
        code.append(highlight(body.join("\n"), m[2]));
        pre.append(code);
        into.append(pre);
        continue;
      }
      if (!line.trim()) { flush(); i++; continue; }
      if ((m = HEADING.exec(line))) {
        flush();
        const h = el("h" + Math.min(6, m[1].length + 2), "md-h");
        inline(m[2], h);
        into.append(h);
        i++;
        continue;
      }
      if (RULE.test(line) && !para.length) { flush(); into.append(el("hr")); i++; continue; }
      if (QUOTE.test(line)) {
        flush();
        const inner = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) { inner.push(m[1]); i++; }
        const q = el("blockquote");
        blocks(inner, q);
        into.append(q);
        continue;
      }
      if (ROW.test(line) && i + 1 < lines.length && DIVIDER.test(lines[i + 1])) {
        flush();
        const table = el("table", "md-table");
        const head = el("tr");
        for (const c of cells(line)) { const th = el("th"); inline(c, th); head.append(th); }
        table.append(head);
        i += 2;
        while (i < lines.length && ROW.test(lines[i])) {
          const tr = el("tr");
          for (const c of cells(lines[i])) { const td = el("td"); inline(c, td); tr.append(td); }
          table.append(tr);
          i++;
        }
        into.append(table);
        continue;
      }
      if ((m = ITEM.exec(line)) && (!para.length || m[1].length === 0)) {
        flush();
        const ordered = /\d/.test(m[2]);
        const list = el(ordered ? "ol" : "ul");
        if (ordered && parseInt(m[2], 10) !== 1) list.setAttribute("start", String(parseInt(m[2], 10)));
        const indent = m[1].length;
        while (i < lines.length && (m = ITEM.exec(lines[i])) && m[1].length === indent) {
          const item = [m[3]];
          i++;
          // continuation lines and nested lists: indented deeper than the marker
          while (i < lines.length && lines[i].trim() && !(ITEM.exec(lines[i]) && ITEM.exec(lines[i])[1].length <= indent) &&
                 (/^\s/.test(lines[i]) || !FENCE.test(lines[i]))) {
            if (!/^\s/.test(lines[i]) && (HEADING.test(lines[i]) || QUOTE.test(lines[i]))) break;
            item.push(lines[i].replace(new RegExp("^\\s{0," + (indent + 4) + "}"), ""));
            i++;
          }
          const li = el("li");
          if (item.length === 1) inline(item[0], li); else blocks(item, li);
          list.append(li);
        }
        into.append(list);
        continue;
      }
      para.push(line);
      i++;
    }
    flush();
  }

  // Whether a text looks like markdown at all: a plain answer stays one text node.
  const MARKS = /(^|\n) {0,3}(#{1,6}\s|[-*+]\s|\d{1,9}[.)]\s|>|```|~~~|\|)|[*_`~]|\]\(|https?:\/\//;

  function render(text) {
    const box = document.createDocumentFragment();
    blocks(String(text).split("\n"), box);
    return box;
  }

  window.convlogMarkdown = { render: render, highlight: highlight, looksLike: (t) => MARKS.test(t) };
})();
