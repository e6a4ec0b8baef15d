// convlog viewer. Every string from the log goes into the page through
// textContent or attributes set by the DOM API, never through innerHTML.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const EXPORT = document.getElementById("convlog-export");

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }

  // Names, paths and tool inputs can hide characters: a right-to-left override makes
  // "report\u202Etxt.exe" read "reportexe.txt", and zero-width ones make two names look
  // alike. There each such character is shown as a visible mark (⟨U+202E⟩), and the text
  // is bidi-isolated (CSS .iso) so it cannot reorder what is around it.
  const HIDDEN = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\ufff9-\ufffb\u{e0000}-\u{e007f}]/gu;
  function codeOf(c) { return "U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0"); }
  function reveal(text) { return String(text).replace(HIDDEN, (c) => "⟨" + codeOf(c) + "⟩"); }
  function named(tag, cls, text) {
    const n = el(tag, (cls ? cls + " " : "") + "iso");
    const s = String(text);
    let at = 0;
    for (const m of s.matchAll(HIDDEN)) {
      if (m.index > at) n.append(document.createTextNode(s.slice(at, m.index)));
      const mark = el("span", "ctl", "⟨" + codeOf(m[0]) + "⟩");
      mark.title = "a hidden character (" + codeOf(m[0]) + ") is in this name";
      n.append(mark);
      at = m.index + m[0].length;
    }
    if (at < s.length) n.append(document.createTextNode(s.slice(at)));
    return n;
  }

  // ------------------------------------------------------------------ data sources
  async function getJSON(url, opts) {
    const r = await fetch(url, opts);
    let body = null;
    try { body = await r.json(); } catch (err) { body = { error: r.statusText || "bad answer" }; }
    if (!r.ok) throw new Error((body && body.error) || r.statusText);
    return body;
  }
  const enc = encodeURIComponent;
  const sess = (sid) => "/api/sessions/" + enc(sid);
  const api = {
    config: () => getJSON("/api/config"),
    // The list and the log position it was read at (see watchStore).
    sessions: async () => {
      const r = await fetch("/api/sessions");
      const body = await r.json().catch(() => ({ error: r.statusText || "bad answer" }));
      if (!r.ok) throw new Error((body && body.error) || r.statusText);
      const at = r.headers.get("X-Convlog-Position");
      view.listedAt = at === null ? null : Number(at);
      return body;
    },
    search: (q) => getJSON("/api/search?q=" + enc(q)),
    state: (sid, seq, start, count, marks, signal, delta) => getJSON(sess(sid) + "/state?" +
      (seq === null ? "" : "seq=" + seq) +
      (start === undefined ? "" : "&start=" + start) + (count ? "&count=" + count : "") +
      (marks === false ? "&marks=0" : "") +
      (delta ? "&have=" + delta.have + "&held=" + delta.first + "-" + delta.last : ""),
      signal ? { signal: signal } : undefined),
    lines: (sid, seq, mid, pid, field, from, count) => getJSON(sess(sid) + "/lines?seq=" + seq +
      "&message=" + enc(mid) + "&part=" + enc(pid) + "&field=" + enc(field) + "&from=" + from +
      "&count=" + count),
    verify: (sid) => getJSON(sess(sid) + "/verify"),
    markers: (sid) => getJSON(sess(sid) + "/markers"),
    usage: (sid) => getJSON(sess(sid) + "/usage"),
    spawner: (sid, child) => getJSON(sess(sid) + "/spawner?child=" + enc(child)),
    find: (sid, q) => getJSON(sess(sid) + "/find?q=" + enc(q)),
    diff: (sa, a, sb, b, start, count) => getJSON(sess(sa) + "/diff?a=" + a + "&b=" + b +
      "&b_session=" + enc(sb) + "&start=" + (start || 0) + "&count=" + (count || 200)),
    fork: (sid, seq, token) => getJSON(sess(sid) + "/fork", {
      method: "POST", headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token },
      body: JSON.stringify({ seq: seq }) }),
    mailbox: () => getJSON("/api/mailbox"),
    project: (pid, agent) => getJSON("/api/mailbox/" + enc(pid) + (agent ? "?agent=" + enc(agent) : "")),
  };

  // An exported file stores, per event, only what the event changed, against the
  // message infos and part JSONs it holds once each (projections/serve/export.py): the
  // state at a seq is rebuilt from the frame before it, and a part that only got deltas
  // since its JSON was stored gets their text appended, so the scrubber works offline
  // without folding events in JS.
  const APPENDS = { "text.delta": ["text", "delta"], "reasoning.delta": ["text", "delta"],
    "tool.input_delta": ["raw", "fragment"] };

  // Appends to each pending part (a copy of its stored JSON) the deltas of events
  // since+1 .. seq; pending: message id -> part id -> { part, since }.
  function appendDeltas(s, pending, from, seq) {
    const pieces = new Map();
    for (let i = from; i < seq; i++) {  // events[i] is the event of seq i + 1
      const e = s.events[i];
      if (!APPENDS[e.tag]) continue;
      const p = pending.has(e.message_id) && pending.get(e.message_id).get(e.part_id);
      if (!p || i < p.since) continue;
      if (!pieces.has(p)) pieces.set(p, []);
      pieces.get(p).push(e);
    }
    for (const [p, evs] of pieces) {
      const [field, from] = APPENDS[evs[0].tag];
      const text = evs.map((e) => e[from]).join("");
      const host = field === "raw" ? p.part.state : p.part;
      if (host && typeof host[field] === "string") host[field] += text;
      // A tool part also keeps the model's argument text on itself (ToolPart.raw): null
      // until the first fragment, then every fragment so far.
      if (field === "raw") p.part.raw = (typeof p.part.raw === "string" ? p.part.raw : "") + text;
    }
  }

  function exportedState(s, seq) {
    let lo = 0, hi = s.frames.length - 1;
    while (lo < hi) {  // the last frame at or before seq
      const mid = (lo + hi + 1) >> 1;
      if (s.frames[mid][0] <= seq) lo = mid; else hi = mid - 1;
    }
    const [start, messages] = s.frames[lo];
    // message id -> { info, parts, own }: parts is copied (own) before it is changed
    const current = new Map(messages.map(([mid, m]) => [mid, { info: m.info, parts: m.parts }]));
    for (let q = start + 1; q <= seq; q++) {
      const change = s.changes[q];
      if (!change) continue;
      const [mid, c] = change;
      if (c.parts) { current.set(mid, { info: c.info, parts: c.parts }); continue; }
      const m = current.get(mid);
      if (c.info !== undefined) m.info = c.info;
      if (c.at !== undefined) {
        if (!m.own) { m.parts = m.parts.slice(); m.own = true; }
        m.parts[c.at] = c.part;
      }
    }
    const pending = new Map();
    let from = seq;
    const all = [];
    for (const [mid, m] of current) {
      const parts = m.parts.map((entry) => {
        if (typeof entry === "number") return s.parts[entry];
        const part = JSON.parse(JSON.stringify(s.parts[entry[0]]));
        if (!pending.has(mid)) pending.set(mid, new Map());
        pending.get(mid).set(part.id, { part: part, since: entry[1] });
        from = Math.min(from, entry[1]);
        return part;
      });
      all.push({ info: s.infos[m.info], parts: parts });
    }
    if (pending.size) appendDeltas(s, pending, from, seq);
    return all;
  }

  function exportSource(data) {
    const s = data.session;
    // The whole state at a seq, for scripts reading an exported file (and its tests).
    window.convlogExport = { state: (seq) => exportedState(s, seq) };
    return {
      config: async () => ({ writes: false, exported: true, anchors: [] }),
      sessions: async () => [s.info],
      search: async () => [],
      verify: async () => data.verify,
      markers: async () => {
        const of = (tag, role) => s.events.filter((e) => e.tag === tag && (!role || e.role === role)).map((e) => e.seq);
        return { ready: true, user: of("message.started", "user"), error: of("tool.failed"),
          compaction: of("compaction.added"), approval: of("tool.approval_requested"), forks: [] };
      },
      usage: async () => data.usage,  // the last piece's: the final state's answers
      diff: async () => { throw new Error("diff needs the server"); },
      mailbox: async () => ({ present: false, projects: [] }),
      state: async (sid, seq, start, count) => {
        const window = count || data.window;
        const all = exportedState(s, seq);
        const ev = seq ? s.events[seq - 1] : null;
        let focus = all.length - 1;
        if (ev && ev.message_id) {
          const i = all.findIndex((m) => m.info.id === ev.message_id);
          if (i >= 0) focus = i;
        }
        if (start === undefined) start = Math.max(0, focus - Math.floor(window / 2));
        start = Math.max(0, Math.min(start, Math.max(0, all.length - window)));
        return { session: sid, seq: seq, version: s.info.version, total: all.length, start: start,
          focus: focus, window: window, messages: all.slice(start, start + window), event: ev,
          marks: s.marks };
      },
    };
  }
  // An exported file holds its data in pieces of a few thousand events (written as they
  // were made, so the writer never held the whole session): the page joins them.
  function exportedData() {
    const data = JSON.parse(EXPORT.textContent);
    const s = data.session;
    for (const k of ["infos", "parts", "changes", "frames", "events", "marks"]) s[k] = [];
    for (const node of document.querySelectorAll("script.convlog-piece")) {
      const piece = JSON.parse(node.textContent);
      for (const k of ["infos", "parts", "changes", "frames", "events", "marks"]) {
        const into = s[k];
        for (const x of piece[k]) into.push(x);
      }
      if (piece.usage) data.usage = piece.usage;
      node.textContent = "";  // the parsed copy is enough
    }
    return data;
  }
  const src = EXPORT ? exportSource(exportedData()) : api;

  // ------------------------------------------------------------------ state
  // The write token arrives once in the address (#token=…, printed by `convlog serve`):
  // it is moved to this tab's sessionStorage and taken out of the address at once, so it
  // is never copied with a link, kept in the history or shown over someone's shoulder.
  const TOKEN_KEY = "convlog-token";
  const token = (() => {
    const h = new URLSearchParams(location.hash.slice(1));
    const given = h.get("token");
    let kept = "";
    try { kept = sessionStorage.getItem(TOKEN_KEY) || ""; } catch (err) { kept = ""; }
    if (given === null) return kept;
    try { sessionStorage.setItem(TOKEN_KEY, given); } catch (err) { /* a file:// page */ }
    h.delete("token");
    const rest = h.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
    return given;
  })();
  const view = { sid: null, seq: 0, version: 0, marks: [], marksOf: "", painted: 0, state: null, sessions: [], listed: false, listedAt: null,
    verify: null, writes: false, pending: 0, live: null, mailbox: null, anchors: [] };

  // The seq moves replace the history entry; opening a session or a mailbox adds one,
  // so back and forward walk between what was opened.
  function setURL(push) {
    const q = view.mailbox
      ? new URLSearchParams(Object.assign({ mailbox: view.mailbox.project },
        view.mailbox.agent ? { agent: view.mailbox.agent } : {}))
      : new URLSearchParams({ session: view.sid, seq: String(view.seq) });
    const url = "?" + q.toString() + location.hash;  // the token has left the hash already
    if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
  }

  function banner(text) {
    const b = $("banner");
    b.hidden = !text;
    b.textContent = text || "";
  }

  // ------------------------------------------------------------------ sessions tree
  function fmtTime(ms) {
    const d = new Date(ms);
    return isNaN(d.getTime()) ? String(ms) : d.toISOString().replace("T", " ").slice(0, 19);
  }

  function sourceLabel(s) {
    const i = s.imported;
    return i ? "imported from " + i.format + (i.tool_version ? " " + i.tool_version : "") : "";
  }

  function fmtCount(n) { return n >= 1e6 ? (n / 1e6).toFixed(1) + "M" : n >= 1e4 ? Math.round(n / 1e3) + "k" : String(n); }
  function fmtSpan(ms) {
    const m = Math.round(ms / 60000);
    return m < 1 ? "<1 min" : m < 120 ? m + " min" : Math.round(m / 60) + " h";
  }
  function sessionTokens(s) {
    const t = s.tokens;
    return t ? t.input + t.output + t.reasoning : null;
  }
  // What the filter box matches: the title, the working directory, the tool, the model.
  function haystack(s) {
    return [s.title, s.cwd, s.model, s.imported && s.imported.format, s.id].filter(Boolean).join(" ").toLowerCase();
  }
  const SORTS = {
    updated: (a, b) => b.updated - a.updated,
    created: (a, b) => b.created - a.created,
    title: (a, b) => (a.title || "~").localeCompare(b.title || "~"),
    events: (a, b) => b.version - a.version,
    tokens: (a, b) => (sessionTokens(b) || 0) - (sessionTokens(a) || 0),
  };

  function renderTree() {
    const tree = $("tree");
    tree.replaceChildren();
    if (!view.sessions.length) {
      tree.append(el("li", "empty small", "no sessions in this store"));
      return;
    }
    const needle = ($("filter").value || "").trim().toLowerCase();
    const source = $("srcfilter").value;
    const order = SORTS[$("sort").value] || SORTS.updated;
    const shown = view.sessions.filter((s) => (!needle || haystack(s).includes(needle)) &&
      (!source || (s.imported ? s.imported.format : "recorded") === source));
    if (!shown.length) tree.append(el("li", "empty small", "no session matches"));
    const kids = new Map();
    const known = new Set(shown.map((o) => o.id));
    for (const s of shown.slice().sort(order)) {
      // A fork sits under its parent; an imported child under the session it came from.
      const up = s.parent || s.child_of;
      const p = up && known.has(up) ? up : "";
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(s);
    }
    const add = (ul, parent) => {
      for (const s of kids.get(parent) || []) {
        const li = el("li");
        const a = el("a", "sess" + (s.id === view.sid && !view.mailbox ? " current" : ""));
        a.href = "?session=" + enc(s.id);
        a.dataset.sid = s.id;
        a.append(named("div", "stitle", s.title || "untitled session"));
        a.title = s.id;
        const where = [];
        if (s.imported) where.push(s.imported.format);
        if (s.model) where.push(s.model);
        if (where.length) {
          const label = named("div", "src", where.join(" · "));
          label.title = s.imported ? reveal(sourceLabel(s) + " · " + s.imported.source) : "";
          a.append(label);
        }
        if (s.cwd) a.append(named("div", "cwd", s.cwd));
        const fork = s.parent ? " · fork at " + s.fork_seq : s.child_of && known.has(s.child_of) ? " · child" : "";
        const bits = [fmtTime(s.updated), fmtSpan(s.updated - s.created)];
        if (s.messages !== null && s.messages !== undefined) bits.push(s.messages + " msgs");
        bits.push(fmtCount(s.version) + " events");
        const tok = sessionTokens(s);
        if (tok) bits.push(fmtCount(tok) + " tok");
        if (s.cost) bits.push("$" + Number(s.cost).toFixed(2));
        a.append(el("div", "meta", bits.join(" · ") + fork));
        a.addEventListener("click", (e) => { e.preventDefault(); openSession(s.id, null, true); });
        li.append(a);
        if (kids.has(s.id)) { const sub = el("ul", "tree"); add(sub, s.id); li.append(sub); }
        ul.append(li);
      }
    };
    add(tree, "");
  }

  async function loadSessions() {
    view.sessions = await src.sessions();
    view.listed = true;
    vl.spare = new Map();  // a kept node may lack a subagent's link or title
    const formats = [...new Set(view.sessions.map((s) => s.imported ? s.imported.format : "recorded"))].sort();
    const pick = $("srcfilter");
    const was = pick.value;
    pick.replaceChildren(el("option", "", "every source"));
    pick.firstChild.value = "";
    for (const f of formats) { const o = el("option", "", f); o.value = f; pick.append(o); }
    pick.value = formats.includes(was) ? was : "";
    renderTree();
    paintBranches();
  }
  for (const id of ["filter", "srcfilter", "sort"]) $(id).addEventListener("input", () => renderTree());

  let searchTimer = 0;
  let searchTicket = 0;
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(async () => {
      const q = $("search").value.trim();
      const ticket = ++searchTicket;
      const box = $("hits");
      if (!q) { box.replaceChildren(); return; }
      let hits;
      try { hits = await src.search(q); } catch (err) { hits = null; }
      if (ticket !== searchTicket) return;  // a later search is under way
      box.replaceChildren();
      if (hits === null) { box.append(el("div", "hit err", "search failed")); return; }
      if (!hits.length) box.append(el("div", "hit none", "no session mentions “" + q + "”"));
      for (const h of hits) {
        const d = el("div", "hit");
        d.dataset.sid = h.session;
        const i = h.snippet.toLowerCase().indexOf(q.toLowerCase());
        d.append(el("div", "id mono", h.session.slice(0, 18) + "…"));
        if (i >= 0) {
          d.append(document.createTextNode(h.snippet.slice(0, i)), el("mark", "", h.snippet.slice(i, i + q.length)),
            document.createTextNode(h.snippet.slice(i + q.length)));
        } else d.append(document.createTextNode(h.snippet));
        d.addEventListener("click", () => openSession(h.session, null, true));
        box.append(d);
      }
    }, 200);
  });

  // ------------------------------------------------------------------ long strings
  // A string of hundreds of lines is shown in a box that holds only the lines on screen.
  // The server clips such strings (part.clipped[field] = its number of lines) and answers
  // the lines as the box scrolls; an exported file splits its own copy.
  const LH = 16;  // px per line in a .lines box (CSS keeps it fixed: no wrapping)
  const LONG_LINES = 200, LONG_CHARS = 20000, LINE_CHARS = 2000, BOX_LINES = 20;

  function cutLine(s) {
    return s.length <= LINE_CHARS ? s : s.slice(0, LINE_CHARS) + "… (+" + (s.length - LINE_CHARS) + " chars)";
  }
  function isLong(text) {
    if (text.length > LONG_CHARS) return true;
    let n = 0;
    for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) if (++n >= LONG_LINES) return true;
    return false;
  }

  function lineBox(total, getLines) {
    const box = el("div", "lines");
    box.style.height = Math.min(total, BOX_LINES) * LH + 12 + "px";
    const spacer = el("div", "lines-spacer");
    spacer.style.height = total * LH + "px";
    const body = el("pre", "lines-body");
    box.append(spacer, body);
    box.dataset.total = String(total);
    let shownFirst = -1, ticket = 0;
    async function paint() {
      const first = Math.max(0, Math.floor(box.scrollTop / LH) - BOX_LINES);
      if (shownFirst >= 0 && Math.abs(first - shownFirst) < BOX_LINES / 2) return;
      const t = ++ticket;
      const lines = await getLines(first, BOX_LINES * 3);
      if (t !== ticket) return;
      shownFirst = first;
      body.style.top = first * LH + "px";
      body.textContent = lines.join("\n");
      body.dataset.first = String(first);
    }
    box.addEventListener("scroll", () => requestAnimationFrame(paint));
    paint();
    return box;
  }

  function textBlock(tag, cls, text, part, field, hidden) {
    const clipped = part.clipped && part.clipped[field];
    if (!clipped && !isLong(text)) return hidden ? named(tag, cls, text) : el(tag, cls, text);
    const wrap = el("div", "long " + cls);
    let getLines;
    let total;
    if (clipped) {
      total = clipped;
      const sid = view.sid, seq = view.seq, mid = part.messageID;
      getLines = async (first, count) => (await src.lines(sid, seq, mid, part.id, field, first, count)).lines;
    } else {
      const all = text.split("\n");
      total = all.length;
      getLines = async (first, count) => all.slice(first, first + count).map(cutLine);
    }
    wrap.append(el("div", "small", field + " · " + total.toLocaleString("en") + " lines"), lineBox(total, getLines));
    return wrap;
  }

  // ------------------------------------------------------------------ parts
  // A text part that looks like markdown, rendered by md.js (DOM API only; raw HTML in
  // it stays text). A long one stays in its line box; data-source keeps the text as
  // written (the page's tests compare it with the log).
  function markdown(p) {
    const md = window.convlogMarkdown;
    if (!md || (p.clipped && p.clipped.text) || isLong(p.text) || !md.looksLike(p.text)) return null;
    const n = el("div", "part text md");
    n.append(md.render(p.text));
    n.dataset.source = p.text;
    return n;
  }
  function json(v) { return typeof v === "string" ? v : JSON.stringify(v, null, 2); }

  function details(cls, summary, body, open) {
    const d = el("details", cls);
    d.append(el("summary", "", summary));
    if (body) d.append(body);
    if (open) d.open = true;
    return d;
  }

  // The thread a Codex spawn_agent call started: its output is {"agent_id": <thread id>}
  // (state.py's spawned_thread; the child session's original_id).
  function spawnedThread(p) {
    if (p.tool !== "spawn_agent" || !p.state || p.state.status !== "completed") return null;
    let out = null;
    try { out = JSON.parse(p.state.output); } catch (err) { return null; }
    return out && typeof out === "object" && typeof out.agent_id === "string" ? out.agent_id : null;
  }

  // The session a tool call ran as a subagent (a Task call): the importers name it in
  // metadata.child_session; OpenCode's task names its own id (state.metadata.sessionId),
  // and Codex's spawn_agent the thread it started (state.py's child_named).
  function childSession(p) {
    for (const meta of [p.metadata, p.state && p.state.metadata, { thread: spawnedThread(p) }]) {
      const id = meta && typeof meta === "object" ? meta.child_session || meta.sessionId || meta.thread : null;
      if (typeof id !== "string" || !id) continue;
      const s = view.sessions.find((o) => o.id === id || (o.imported && o.imported.original_id === id && o.id !== view.sid));
      if (s) return s;
    }
    return null;
  }

  function renderPart(p) {
    let n;
    switch (p.type) {
      case "text":
        n = markdown(p) || textBlock("div", "part text", p.text, p, "text");
        break;
      case "reasoning": {
        const chars = p.clipped ? "long" : p.text.length + " chars";
        n = details("part reasoning", "reasoning · " + chars, textBlock("div", "body", p.text, p, "text"));
        break;
      }
      case "tool": {
        n = el("div", "part tool");
        const head = el("div", "tool-head");
        head.append(named("span", "name", p.tool), el("span", "st " + p.state.status, p.state.status));
        if (p.approval) head.append(el("span", "st " + p.approval.state, "approval " + p.approval.state));
        if (p.state.title) head.append(named("span", "title", p.state.title));
        n.append(head);
        const child = childSession(p);
        if (child) {
          const a = el("a", "childlink");
          a.href = "?session=" + enc(child.id);
          a.dataset.child = child.id;
          a.append("↳ subagent session: ", named("span", "", child.title || child.id));
          a.addEventListener("click", (e) => { e.preventDefault(); openSession(child.id, null, true); });
          n.append(a);
        }
        const input = p.state.status === "pending"
          ? textBlock("pre", "iso", p.state.raw || json(p.state.input), p, "raw", true)
          : named("pre", "", json(p.state.input));
        n.append(details("", "input", input));
        if (p.state.status === "completed") n.append(details("", "output", textBlock("pre", "", p.state.output, p, "output"), true));
        if (p.state.status === "error") n.append(textBlock("pre", "err", p.state.error, p, "error"));
        if (p.approval && p.approval.reason) n.append(el("div", "small", "approval reason: " + p.approval.reason));
        break;
      }
      case "file":
        n = named("div", "part file", "file " + (p.filename || p.url) + " · " + p.mime);
        break;
      case "step-start":
        n = el("div", "part step", "step started" + (p.snapshot ? " · snapshot " + p.snapshot : ""));
        break;
      case "step-finish": {
        const t = p.tokens;
        n = el("div", "part step", "step finished (" + p.reason + ") · cost $" + Number(p.cost).toFixed(4) +
          " · tokens in " + t.input + " out " + t.output + " reasoning " + t.reasoning +
          " cache r/w " + t.cache.read + "/" + t.cache.write);
        break;
      }
      case "compaction":
        n = el("div", "part compaction", "— compaction" + (p.auto ? " (auto)" : "") + " —");
        break;
      case "subtask":
        n = el("div", "part subtask");
        n.append(el("div", "small", "tangent · subtask for " + p.agent + ": " + p.description),
          el("div", "", p.prompt));
        break;
      case "retry":
        n = el("div", "part small err", "retry " + p.attempt + ": " + p.error.kind + " " + p.error.message);
        break;
      case "patch":
        n = named("div", "part small patch", "patch " + p.hash + ": " + p.files.join(", "));
        break;
      case "agent":
        n = el("div", "part small", "agent " + p.name);
        break;
      default:
        n = el("div", "part small", p.type + (p.snapshot ? " " + p.snapshot : ""));
    }
    n.dataset.part = p.id;
    return n;
  }

  function renderMessage(m) {
    const info = m.info;
    const box = el("article", "msg " + info.role);
    box.dataset.msg = info.id;
    const head = el("div", "msg-head");
    head.append(el("span", "role", info.role));
    if (info.agent) head.append(named("span", "", info.agent));
    // A user message names its model in info.model; an assistant's in info itself.
    const ref = info.model || info;
    if (ref.modelID) head.append(named("span", "model", (ref.providerID ? ref.providerID + "/" : "") + ref.modelID));
    head.append(el("span", "", fmtTime(info.time.created)));
    if (info.role === "assistant") {
      head.append(el("span", "", info.time.completed ? "completed" + (info.finish ? " · " + info.finish : "") : "streaming…"));
      // The message's own totals when its source gave them, else its steps' sums (the
      // rule of the session's usage, projections/serve/titles.py).
      let cost = info.cost, t = info.tokens;
      const steps = m.parts.filter((p) => p.type === "step-finish");
      if (!(cost || (t && (t.input || t.output))) && steps.length) {
        cost = 0;
        t = { input: 0, output: 0, reasoning: 0, cache: { read: 0, write: 0 } };
        for (const p of steps) {
          cost += Number(p.cost) || 0;
          t.input += p.tokens.input; t.output += p.tokens.output; t.reasoning += p.tokens.reasoning;
          t.cache.read += p.tokens.cache.read; t.cache.write += p.tokens.cache.write;
        }
      }
      if (cost) head.append(el("span", "", "$" + Number(cost).toFixed(4)));
      if (t && (t.input || t.output)) {
        head.append(el("span", "tokens", "tokens in " + t.input + " · out " + t.output +
          (t.reasoning ? " · reasoning " + t.reasoning : "") +
          (t.cache && (t.cache.read || t.cache.write) ? " · cache " + t.cache.read + "/" + t.cache.write : "")));
      }
      if (info.error) head.append(el("span", "err", "error " + info.error.kind + ": " + info.error.message));
    }
    box.append(head);
    for (const p of m.parts) box.append(renderPart(p));
    return box;
  }

  // ------------------------------------------------------------------ the windowed list
  // Only the messages on screen (and a few around) are in the DOM. Spacers above and
  // below stand for the others, at their measured height or the mean of those measured.
  const MAX_NODES = 24;  // messages in the DOM at most, whatever the session's length
  const OVERSCAN = 400;  // px rendered beyond the visible area
  const FETCH = 24;  // messages per request while scrolling
  const SHOW_COUNT = 8;  // messages in the answer to a scrub (a bigger one costs its latency)
  const vl = { total: 0, seq: -1, msgs: new Map(), nodes: new Map(), heights: new Map(), sum: 0, first: 0, last: 0,
    fetching: 0, rendered: "", focus: null, setTop: 0, spare: new Map() };

  function estimate() { return vl.heights.size ? vl.sum / vl.heights.size : 180; }
  function heightOf(i) { const h = vl.heights.get(i); return h === undefined ? estimate() : h; }
  function setHeight(i, h) {
    const old = vl.heights.get(i);
    if (old !== undefined) vl.sum -= old;
    vl.heights.set(i, h);
    vl.sum += h;
  }
  function offsetOf(i) {
    let y = 0;
    const est = estimate();
    for (let j = 0; j < i; j++) { const h = vl.heights.get(j); y += h === undefined ? est : h; }
    return y;
  }
  function indexAt(y) {
    let top = 0;
    const est = estimate();
    for (let i = 0; i < vl.total; i++) {
      const h = vl.heights.get(i);
      top += h === undefined ? est : h;
      if (top > y) return i;
    }
    return Math.max(0, vl.total - 1);
  }

  function resetList(sid) {
    vl.total = 0; vl.seq = -1; vl.msgs = new Map(); vl.heights = new Map(); vl.sum = 0;
    vl.first = 0; vl.last = 0; vl.rendered = ""; vl.sid = sid; vl.focus = null; vl.nodes = new Map();
    vl.spare = new Map();
    $("vlist").replaceChildren();
    $("vtop").style.height = "0px";
    $("vbot").style.height = "0px";
  }

  // A message's JSON as the page last rendered it: a message that did not change between
  // two seqs (all but the one the event touched, on a step) keeps its node, so a scrub
  // renders and lays out only what changed.
  // A message with a clipped string is never kept: its line box reads the rest of the
  // string at its own seq, and the rest may differ where the head does not.
  const shapes = new WeakMap();
  function shapeOf(m) {
    let k = shapes.get(m);
    if (k === undefined) {
      k = m.parts.some((p) => p.clipped) ? null : JSON.stringify(m);
      shapes.set(m, k);
    }
    return k;
  }
  function takeState(st) {
    if (st.seq !== vl.seq) {
      const spare = new Map();
      for (const [, [m, n]] of vl.nodes) if (shapeOf(m) !== null) spare.set(m.info.id, [shapeOf(m), n]);
      for (const [id, x] of vl.spare) if (spare.size < MAX_NODES * 2 && !spare.has(id)) spare.set(id, x);
      vl.spare = spare;
      vl.msgs = new Map(); vl.nodes = new Map();
    }
    vl.seq = st.seq;
    vl.total = st.total;
    st.messages.forEach((m, k) => vl.msgs.set(st.start + k, m));
  }

  // The spacers stand for the messages not in the DOM. They and the nodes change together,
  // and the scroll position is kept as "this many px into message i" across the change:
  // swapping nodes first and sizing the spacers after let the browser clamp scrollTop to
  // a momentarily shorter list, so scrolling down could stop before the end.
  function setSpacers() {
    $("vtop").style.height = offsetOf(vl.first) + "px";
    $("vbot").style.height = Math.max(0, offsetOf(vl.total) - offsetOf(vl.last)) + "px";
  }

  // The page's own scroll moves, remembered so that a scroll event can tell a person's
  // scroll (which ends the hold on the focused part) from the page's.
  function setTop(y) {
    const conv = $("conv");
    conv.scrollTop = Math.max(0, y);
    vl.setTop = conv.scrollTop;
  }

  // How far to scroll so that the part the event touched is on screen (0: it is).
  function focusOffset() {
    const conv = $("conv");
    const target = highlight();
    if (!target) {
      if (vl.focus >= vl.first && vl.focus < vl.last) return 0;  // still loading
      return offsetOf(vl.focus) - 8 - conv.scrollTop;
    }
    const r = target.getBoundingClientRect(), b = conv.getBoundingClientRect();
    if (r.height > b.height || r.top < b.top) return r.top - b.top - 8;  // its top
    if (r.bottom > b.bottom) return r.bottom - b.bottom + 8;
    return 0;
  }

  // While the view holds on the focused part (from a scrub until a person scrolls), each
  // render puts it back on screen: messages arriving or measured above it move it.
  function renderList() {
    // A person's scroll ends the hold, even one whose scroll event has not fired yet
    // (a message arriving first must not pull the view back to the focused part).
    if (vl.focus !== null && Math.abs($("conv").scrollTop - vl.setTop) > 1) vl.focus = null;
    renderWindow();
    for (let round = 0; vl.focus !== null && round < 8; round++) {
      const dy = focusOffset();
      if (Math.abs(dy) <= 1) break;
      setTop($("conv").scrollTop + dy);
      renderWindow();
    }
  }

  function renderWindow() {
    const conv = $("conv");
    const note = $("note");
    if (!vl.total) {
      $("vlist").replaceChildren();
      $("vtop").style.height = "0px";
      $("vbot").style.height = "0px";
      note.hidden = false;
      note.textContent = view.state && view.state.version === 0 ? "this session has no events yet"
        : "no messages yet at seq " + vl.seq;
      return;
    }
    note.hidden = true;
    const top = conv.scrollTop;
    const anchor = indexAt(top);
    const into = top - offsetOf(anchor);
    let first = indexAt(Math.max(0, top - OVERSCAN));
    let last = Math.min(vl.total, indexAt(top + conv.clientHeight + OVERSCAN) + 1);
    if (last - first > MAX_NODES) {
      const mid = indexAt(top + conv.clientHeight / 2);
      first = Math.max(0, Math.min(first, mid - MAX_NODES / 2));
      last = Math.min(vl.total, first + MAX_NODES);
    }
    // The first run of missing messages: after a scrub the answer's 8 sit in the middle
    // of the window, and one range over both edges would fetch (and the server build)
    // those 8 again. The next run is fetched when this one is in.
    const missing = [];
    for (let i = first; i < last; i++) {
      if (!vl.msgs.has(i)) missing.push(i);
      else if (missing.length) break;
    }
    if (missing.length) fetchRange(missing[0], missing[missing.length - 1] + 1);
    const key = vl.seq + ":" + first + ":" + last + ":" + missing.length;
    if (key !== vl.rendered) {
      vl.rendered = key;
      const nodes = [];
      const kept = new Map();
      for (let i = first; i < last; i++) {
        const m = vl.msgs.get(i);
        // A message already on the page stays the same node: a line box scrolled in it
        // keeps its place when the messages around it arrive.
        const had = vl.nodes.get(i);
        const spare = m && !(had && had[0] === m) ? vl.spare.get(m.info.id) : undefined;
        const n = m && had && had[0] === m ? had[1]
          : spare && spare[0] !== null && spare[0] === shapeOf(m) ? spare[1]
          : m ? renderMessage(m) : el("article", "msg placeholder", "loading…");
        n.dataset.index = String(i);
        if (!m) n.style.height = heightOf(i) - 12 + "px";
        else kept.set(i, [m, n]);
        nodes.push(n);
      }
      vl.nodes = kept;
      vl.first = first; vl.last = last;
      setSpacers();
      setChildren($("vlist"), nodes);
      highlight();
    }
    measure(anchor, into);
  }

  // The list's children become ``nodes`` without taking out the ones that stay (a node
  // taken out and put back loses its scroll position).
  function setChildren(parent, nodes) {
    const want = new Set(nodes);
    for (const c of [...parent.children]) if (!want.has(c)) c.remove();
    let cur = parent.firstChild;
    for (const n of nodes) {
      if (n === cur) { cur = cur.nextSibling; continue; }
      parent.insertBefore(n, cur);
    }
  }

  // Measured heights replace estimates; then the spacers are sized again and the view is
  // put back at the same place in the same message.
  function measure(anchor, into) {
    const conv = $("conv");
    for (const n of $("vlist").children) {
      if (n.classList.contains("placeholder")) continue;
      const h = n.offsetHeight + 12;  // + the margin below each message
      const i = Number(n.dataset.index);
      if (vl.heights.get(i) !== h) setHeight(i, h);
    }
    setSpacers();
    const want = offsetOf(anchor) + into;
    if (Math.abs(conv.scrollTop - want) > 1) setTop(want);
  }

  let fetchTimer = 0;
  let rangeAsked = null;
  function fetchRange(from, to) {
    clearTimeout(fetchTimer);
    fetchTimer = setTimeout(async () => {
      const ticket = ++vl.fetching;
      const sid = view.sid, seq = vl.seq;
      // While scrolling, a few screenfuls at a time; after a scrub (the view holds on the
      // focused part), only the run missing and a few beyond.
      const start = Math.max(0, from - 4);
      const count = Math.min(64, Math.max(vl.focus !== null ? 0 : FETCH, to - start + 4));
      const asked = rangeAsked = new AbortController();
      let st;
      try { st = await src.state(sid, seq, start, count, false, asked.signal); } catch (err) { return; }
      finally { if (rangeAsked === asked) rangeAsked = null; }
      if (ticket !== vl.fetching || sid !== view.sid || seq !== vl.seq) return;
      // Same seq, same messages: the ones held (and maybe on screen) are kept.
      st.messages.forEach((m, k) => { if (!vl.msgs.has(st.start + k)) vl.msgs.set(st.start + k, m); });
      vl.rendered = "";
      renderList();
    }, 30);
  }

  let scrollQueued = false;
  $("conv").addEventListener("scroll", () => {
    if (vl.focus !== null && Math.abs($("conv").scrollTop - vl.setTop) > 1) vl.focus = null;
    if (scrollQueued || !view.sid || view.mailbox) return;
    scrollQueued = true;
    requestAnimationFrame(() => { scrollQueued = false; renderList(); });
  });

  function highlight() {
    const ev = view.state && view.state.event;
    let target = null;
    for (const old of $("vlist").querySelectorAll(".hl")) old.classList.remove("hl");
    if (ev && ev.message_id) {
      const m = $("vlist").querySelector('[data-msg="' + CSS.escape(ev.message_id) + '"]');
      target = m;
      if (m && ev.part_id) target = m.querySelector('[data-part="' + CSS.escape(ev.part_id) + '"]') || m;
    }
    if (target) target.classList.add("hl");
    return target;
  }

  // Brings the part the event touched on screen: first roughly (from the heights known),
  // then by its own position once rendered (renderList), and holds it there until a
  // person scrolls.
  function scrollToFocus(st) {
    const conv = $("conv");
    vl.focus = st.total && st.focus >= 0 ? st.focus : null;
    vl.setTop = conv.scrollTop;  // the hold starts from where the view is now
    if (vl.focus === null) { renderList(); return; }
    const top = offsetOf(st.focus);
    const bottom = top + heightOf(st.focus);
    if (top < conv.scrollTop || bottom > conv.scrollTop + conv.clientHeight) {
      vl.first = Math.min(vl.first, st.focus); vl.last = Math.max(vl.last, st.focus + 1);
      setSpacers();  // first, so that the scrollTop below is not clamped
      setTop(bottom > conv.scrollTop + conv.clientHeight && heightOf(st.focus) < conv.clientHeight
        ? bottom - conv.clientHeight + 8 : top - 8);
    }
    renderList();
  }

  // ------------------------------------------------------------------ conversation
  function describe(ev) {
    if (!ev) return "seq 0: the empty session";
    const bits = [];
    for (const k of ["message_id", "part_id", "role", "tool", "delta", "fragment", "output", "error", "reason",
      "format", "source"]) {
      if (ev[k] !== undefined && ev[k] !== null && ev[k] !== "") {
        let v = typeof ev[k] === "string" ? ev[k] : JSON.stringify(ev[k]);
        if (v.length > 80) v = v.slice(0, 80) + "…";
        bits.push(k + "=" + v);
      }
    }
    return bits.join("  ");
  }

  function renderState(st) {
    takeState(st);
    vl.rendered = "";
    scrollToFocus(st);
    const evBox = $("event");
    evBox.replaceChildren(el("b", "", st.event ? "#" + st.seq + " " + st.event.tag : "#0"),
      document.createTextNode("  " + describe(st.event)));
    $("seqlabel").textContent = "seq " + st.seq + " / " + st.version;
    renderVerify();
  }

  function renderVerify() {
    const b = $("verify");
    const v = view.verify;
    b.title = "";
    if (!v) { b.className = "badge"; b.textContent = view.sid ? "verifying…" : ""; return; }
    const anchor = v.anchor;
    const held = anchor && anchor.holds ? " · anchor at seq " + anchor.seq + " holds" : "";
    if (v.ok === null) {
      b.className = "badge";
      b.textContent = "chain not checked";
      b.title = v.problem || "";
    } else if (!v.ok) {
      b.className = "badge bad";
      b.textContent = anchor && !anchor.holds
        ? "✗ anchor at seq " + anchor.seq + " fails"
        : "✗ chain broken at seq " + (v.verified_upto + 1) +
          (view.seq <= v.verified_upto ? " (sound up to seq " + v.verified_upto + ")" : "");
      b.title = v.problem || "";
    } else if (view.seq <= v.verified_upto) {
      b.className = "badge ok";
      b.textContent = "✓ chain verified to seq " + view.seq + held;
    } else {
      b.className = "badge";
      b.textContent = "chain verified to seq " + v.verified_upto + held;
    }
  }

  function refreshVerify(sid) {
    src.verify(sid).then((v) => { if (sid === view.sid) { view.verify = v; renderVerify(); } },
      (err) => { if (sid === view.sid) { view.verify = { ok: null, problem: String(err.message || err) }; renderVerify(); } });
  }

  // One state request at a time, for the latest seq asked for only. A drag fires input
  // events faster than the server answers: the seqs asked for within one task collapse
  // into the last (the wait for a microtask below), and a later seq aborts the request
  // in flight, whose answer would only be painted over (the server skips an aborted
  // request it has not started). Only the answer to the latest seq asked for is painted,
  // so a fast scrub never shows an older state last. For benchmarks/viewer.py the page
  // marks the seq's input, its request's start, its answer in, and its state on the page.
  let inFlight = null;

  // What the list holds, for a delta answer: the seq its messages are of and the longest
  // run of indexes held. The server sends a message of the new window that is the same
  // as a held one as {same: id}, and the page puts in the held one (the same object, so
  // its node is kept without comparing; see takeState).
  function heldRun(sid) {
    if (vl.sid !== sid || vl.seq < 0 || !vl.msgs.size) return null;
    const idx = [...vl.msgs.keys()].sort((a, b) => a - b);
    let best = [idx[0], idx[0] + 1], cur = [idx[0], idx[0] + 1];
    for (const i of idx.slice(1)) {
      cur = i === cur[1] ? [cur[0], i + 1] : [i, i + 1];
      if (cur[1] - cur[0] > best[1] - best[0]) best = cur;
    }
    return { have: vl.seq, first: best[0], last: best[1] };
  }
  // The answer with each {same: id} replaced by the held message; null if one is not
  // held (the list moved on meanwhile): the page then asks for the whole answer.
  function filled(st, sid) {
    if (st.have === null || st.have === undefined) return st;
    if (vl.sid !== sid || vl.seq !== st.have) return null;
    const held = new Map();
    for (const m of vl.msgs.values()) held.set(m.info.id, m);
    const messages = st.messages.map((m) => (m.same === undefined ? m : held.get(m.same)));
    return messages.includes(undefined) ? null : { ...st, messages: messages };
  }

  async function show(seq, start, given) {
    const ticket = ++view.pending;
    view.seq = seq;
    $("slider").value = String(seq);
    let st = given;
    if (st) setURL(false);
    else {
      await null;  // the other input events of this task run first
      if (ticket !== view.pending) return;  // a later seq was asked for: it goes instead
      if (inFlight) inFlight.abort();
      // The list's fetch for the seq shown is of no use now (its answer would be put on
      // the page while this one is awaited, and delay it): it is dropped.
      clearTimeout(fetchTimer);
      ++vl.fetching;
      if (rangeAsked) rangeAsked.abort();
      const asked = new AbortController();
      inFlight = asked;
      const sid = view.sid;
      performance.mark("convlog:fetch", { detail: seq });
      try {
        // A screenful: the messages around the focus; more come as the list needs them.
        // The marks (a seq per message: 4,716 numbers at 1M events, half an answer) only
        // when those held are not this version's.
        const marks = view.marksOf !== sid + ":" + view.version;
        const asking = src.state(sid, seq, start, SHOW_COUNT, marks, asked.signal,
          EXPORT ? null : heldRun(sid));
        setURL(false);  // once the request is on its way
        st = filled(await asking, sid) ||
          await src.state(sid, seq, start, SHOW_COUNT, marks, asked.signal);
      } catch (err) {
        if (!asked.signal.aborted && ticket === view.pending) {
          banner("cannot show seq " + seq + ": " + (err.message || err));
        }
        return;
      } finally {
        if (inFlight === asked) inFlight = null;
      }
      if (ticket !== view.pending || sid !== view.sid || view.mailbox) return;
    }
    view.painted = ticket;
    // For benchmarks/viewer.py: when the answer was in, and (below) when it was on the page.
    performance.mark("convlog:answer", { detail: st.seq });
    banner("");
    view.state = st;
    view.version = st.version;
    if (st.marks) { view.marks = st.marks; view.marksOf = st.session + ":" + st.version; }
    $("slider").max = String(st.version);
    $("slider").value = String(view.seq);  // the latest asked for, which may be on its way
    renderState(st);
    paintTimeline();
    document.body.dataset.shownSeq = String(st.seq);
    performance.mark("convlog:shown", { detail: st.seq });
  }

  function showSessionView(on) {
    $("bar").hidden = !on;
    $("conv").hidden = !on;
    $("mailbox").hidden = on;
    if (on) closeMailbox();
  }

  function sessionHeader(sid) {
    const info = view.sessions.find((s) => s.id === sid);
    $("title").replaceChildren(...named("span", "", info && info.title ? info.title : sid).childNodes);
    $("title").title = sid;
    const label = info ? sourceLabel(info) : "";
    $("source").hidden = !label;
    $("source").replaceChildren(...named("span", "", label).childNodes);
    $("source").title = info && info.imported ? reveal(info.imported.source) : "";
    // A subagent's session links back to the call in the session that ran it.
    const up = info && info.child_of ? view.sessions.find((s) => s.id === info.child_of) : null;
    const back = $("spawnedby");
    back.hidden = !up;
    if (up) {
      back.replaceChildren("↑ spawned by ", named("span", "", up.title || up.id));
      back.href = "?session=" + enc(up.id);
      back.dataset.parent = up.id;
    }
    return info;
  }
  $("spawnedby").addEventListener("click", async (e) => {
    e.preventDefault();
    const parent = $("spawnedby").dataset.parent, child = view.sid;
    if (!parent || !child) return;
    let at = null;
    try { at = await src.spawner(parent, child); } catch (err) { at = null; }
    await openSession(parent, at && at.seq !== null ? at.seq : null, true);
  });

  // A link to a session opens it before the session list is in (listing folds every
  // session's title, seconds for a store of long sessions): the state answer says the
  // version, and the list fills the header in when it comes. A session the server does
  // not know, or a seq past its end, waits for the list and is handled as below.
  async function openEarly(sid, seq, listing) {
    // The list is asked for after this state: on a fresh server the two would share
    // the interpreter, and the list folds every session's title.
    showSessionView(true);
    view.sid = sid;
    view.verify = null;
    sessionHeader(sid);
    resetList(sid);
    delete document.body.dataset.shownSeq;
    const want = seq === null || !Number.isFinite(seq) ? null : Math.max(0, Math.trunc(seq));
    let st;
    try { st = await src.state(sid, want); } catch (err) { st = null; }
    if (!st || sid !== view.sid) {
      await listing().catch(() => null);
      if (sid === view.sid) await openSession(sid, seq, false);
      return;
    }
    view.version = st.version;
    $("slider").max = String(st.version);
    view.seq = st.seq;
    setURL(false);
    view.markers = null;
    view.usage = null;
    $("usagerow").hidden = true;
    $("find").value = "";
    await show(st.seq, undefined, st);
    listing().catch(() => null);
    renderVerify();
    refreshVerify(sid);
    loadMarkers(sid);
    follow(sid);
  }

  async function openSession(sid, seq, push) {
    showSessionView(true);
    view.sid = sid;
    view.verify = null;
    const info = sessionHeader(sid);
    renderTree();
    paintBranches();
    $("diff").hidden = true;
    $("diffform").hidden = true;
    resetList(sid);
    delete document.body.dataset.shownSeq;
    if (!info) {
      banner("no session " + sid + " in this store");
      $("title").textContent = "pick a session";
      $("note").hidden = false;
      $("note").textContent = "pick a session on the left";
      view.sid = null;
      return;
    }
    banner("");
    const version = info.version;
    view.version = version;
    $("slider").max = String(version);
    const want = seq === null || !Number.isFinite(seq) ? version : Math.max(0, Math.min(Math.trunc(seq), version));
    view.seq = want;
    setURL(push);
    view.markers = null;
    view.usage = null;
    $("usagerow").hidden = true;
    $("find").value = "";
    await show(want);
    renderVerify();
    refreshVerify(sid);
    loadMarkers(sid);
    follow(sid);
  }

  // ------------------------------------------------------------------ live
  function stopLive() {
    if (view.live) view.live.close();
    view.live = null;
    for (const b of document.querySelectorAll(".live")) { b.textContent = ""; b.className = "badge live"; }
  }

  function liveFeed(sid, badge, onVersion) {
    stopLive();
    if (EXPORT || !window.EventSource) return;
    const es = new EventSource(sess(sid) + "/live");
    view.live = es;
    es.onopen = () => { badge.textContent = "● live"; badge.className = "badge live ok"; };
    es.onerror = () => { badge.textContent = "○ offline"; badge.className = "badge live"; };
    es.onmessage = (m) => onVersion(JSON.parse(m.data).version);
  }

  function follow(sid) {
    liveFeed(sid, $("live"), (v) => {
      if (sid !== view.sid || view.mailbox || v === view.version) return;
      const atEnd = view.seq === view.version;
      view.version = v;
      $("slider").max = String(v);
      $("seqlabel").textContent = "seq " + view.seq + " / " + v;
      if (atEnd) show(v);
      refreshVerify(sid);
      loadMarkers(sid);  // and the usage; the session list follows the store's feed
    });
  }

  // ------------------------------------------------------------------ timeline
  // Ticks under the slider for user turns, tool errors, compactions, approvals and forks,
  // at most one per pixel and kind; ◀ ▶ jump to the previous or next of the chosen kind.
  const KINDS = ["user", "error", "compaction", "approval", "forks", "hits"];
  let markerTimer = 0;

  async function loadMarkers(sid) {
    clearTimeout(markerTimer);
    let m;
    try { m = await src.markers(sid); } catch (err) { return; }
    if (sid !== view.sid) return;
    if (view.markers && view.markers.hits) m.hits = view.markers.hits;
    view.markers = m;
    if (!m.ready) markerTimer = setTimeout(() => loadMarkers(sid), 2000);  // still building
    // The usage after the marks: it builds every message of the latest state, which in
    // a long session is better done once the page's first answers are in.
    else loadUsage(sid);
    paintTimeline();
  }

  // The ticks are drawn again only when the markers, the length or the width change: a
  // scrub only moves the "now" line (a long session has hundreds of ticks per kind).
  let ticksDrawn = { m: null, version: -1, width: -1, hits: null };
  function paintTimeline() {
    const bar = $("timeline");
    const m = view.markers;
    const width = bar.clientWidth || 600;
    const nodes = [];
    const same = m && view.version && ticksDrawn.m === m && ticksDrawn.version === view.version &&
      ticksDrawn.width === width && ticksDrawn.hits === m.hits && bar.querySelector(".now");
    if (same) {
      // A transform: the mark's own layer moves, the ticks are not painted again.
      bar.querySelector(".now").style.transform = "translateX(" + Math.round(view.seq / view.version * (width - 2)) + "px)";
    } else if (m && view.version) {
      for (const kind of KINDS) {
        const seen = new Set();
        for (const seq of m[kind] || []) {
          const x = Math.round(seq / view.version * (width - 2));
          if (seen.has(x)) continue;
          seen.add(x);
          const t = el("div", "tick " + kind);
          t.style.left = x + "px";
          nodes.push(t);
        }
      }
      const now = el("div", "now");
      now.style.transform = "translateX(" + Math.round(view.seq / view.version * (width - 2)) + "px)";
      nodes.push(now);
      ticksDrawn = { m: m, version: view.version, width: width, hits: m.hits };
    }
    if (!same) bar.replaceChildren(...nodes);
    const list = m && m[$("jumpkind").value];
    const kind = $("jumpkind").value;
    $("jumpcount").textContent = !m ? "" : !m.ready && kind !== "forks" && kind !== "hits" ? "indexing…"
      : (list ? list.length : 0) + " " + $("jumpkind").selectedOptions[0].textContent;
    bar.dataset.ready = m && m.ready ? "1" : "0";
  }

  function jump(dir) {
    const list = (view.markers && view.markers[$("jumpkind").value]) || [];
    if (dir > 0) { const n = list.find((s) => s > view.seq); if (n !== undefined) step(n); }
    else { let p; for (const s of list) if (s < view.seq) p = s; if (p !== undefined) step(p); }
  }
  // Find in this session: the messages that mention the words, as ticks and jumps.
  let findTimer = 0;
  $("find").addEventListener("input", () => {
    clearTimeout(findTimer);
    findTimer = setTimeout(async () => {
      const q = $("find").value.trim();
      const sid = view.sid;
      if (!sid || !src.find) return;
      let got;
      try { got = q ? await src.find(sid, q) : { hits: [] }; } catch (err) { return; }
      if (sid !== view.sid) return;
      view.markers = view.markers || { ready: false };
      view.markers.hits = got.hits.filter((h) => h.seq !== null).map((h) => h.seq);
      if (q) $("jumpkind").value = "hits";
      paintTimeline();
      $("find").dataset.hits = String(got.hits.length);
    }, 200);
  });
  $("jumpprev").addEventListener("click", () => jump(-1));
  $("jumpnext").addEventListener("click", () => jump(1));
  $("jumpkind").addEventListener("input", paintTimeline);
  $("timeline").addEventListener("click", (e) => {
    const r = $("timeline").getBoundingClientRect();
    step(Math.round((e.clientX - r.left) / r.width * view.version));
  });

  // ------------------------------------------------------------------ usage
  // Tokens per assistant message as bars under the timeline (input below, output on
  // top, at the seq where the message starts), the cost so far as a line, and the
  // session's totals beside it; hovering names a message, clicking goes there.
  let usageTimer = 0;
  function fmtTok(t) {
    return "in " + fmtCount(t.input) + " · out " + fmtCount(t.output) +
      (t.reasoning ? " · reasoning " + fmtCount(t.reasoning) : "") +
      (t.cache_read || t.cache_write ? " · cache " + fmtCount(t.cache_read) + "/" + fmtCount(t.cache_write) : "");
  }
  async function loadUsage(sid) {
    clearTimeout(usageTimer);
    if (!src.usage) return;
    let u;
    try { u = await src.usage(sid); } catch (err) { return; }
    if (sid !== view.sid) return;
    view.usage = u;
    if (!u.ready) usageTimer = setTimeout(() => loadUsage(sid), 2000);  // seqs still indexing
    paintUsage();
  }
  function usageTotal(u) {
    const t = u.total.tokens;
    return "session: " + u.messages.length + " answers · tokens " + fmtTok(t) + " · $" + Number(u.total.cost).toFixed(4);
  }
  function paintUsage() {
    const u = view.usage;
    const row = $("usagerow");
    const rows = u ? u.messages.filter((m) => m.seq !== null) : [];
    row.hidden = !u || !u.messages.length;
    if (row.hidden) return;
    const c = $("usage");
    const width = Math.max(100, $("timeline").clientWidth || 600);
    const ratio = window.devicePixelRatio || 1;
    c.style.width = width + "px";
    c.width = Math.round(width * ratio);
    c.height = Math.round(36 * ratio);
    const g = c.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, 36);
    const most = Math.max(1, ...rows.map((m) => m.tokens.input + m.tokens.output));
    const totalCost = Math.max(1e-9, u.total.cost);
    const x = (seq) => Math.round(seq / Math.max(1, view.version) * (width - 3));
    let spent = 0;
    const line = [];
    const bar = Math.max(2, Math.min(8, Math.floor(width / Math.max(1, rows.length) * 0.5)));
    for (const m of rows) {
      const hIn = m.tokens.input / most * 34, hOut = m.tokens.output / most * 34;
      g.fillStyle = "#81a1c1";
      g.fillRect(x(m.seq), 36 - hIn, bar, hIn);
      g.fillStyle = "#a3be8c";
      g.fillRect(x(m.seq), 36 - hIn - hOut, bar, hOut);
      spent += m.cost;
      line.push([x(m.seq) + 1, 35 - spent / totalCost * 33]);
    }
    if (u.total.cost > 0) {
      g.strokeStyle = "#d08770";
      g.lineWidth = 1.5;
      g.beginPath();
      line.forEach(([px, py], k) => (k ? g.lineTo(px, py) : g.moveTo(px, py)));
      g.stroke();
    }
    c.dataset.bars = String(rows.length);
    $("usagesum").textContent = usageTotal(u);
  }
  function usageAt(e) {
    const u = view.usage;
    if (!u) return null;
    const r = $("usage").getBoundingClientRect();
    const seq = (e.clientX - r.left) / r.width * view.version;
    let best = null;
    for (const m of u.messages) {
      if (m.seq !== null && (best === null || Math.abs(m.seq - seq) < Math.abs(best.seq - seq))) best = m;
    }
    return best;
  }
  $("usage").addEventListener("mousemove", (e) => {
    const m = usageAt(e);
    if (m) $("usagesum").textContent = "message " + (m.index + 1) + " at seq " + m.seq + ": tokens " +
      fmtTok(m.tokens) + " · $" + Number(m.cost).toFixed(4);
  });
  $("usage").addEventListener("mouseleave", () => { if (view.usage) $("usagesum").textContent = usageTotal(view.usage); });
  $("usage").addEventListener("click", (e) => { const m = usageAt(e); if (m) step(m.seq); });

  // ------------------------------------------------------------------ scrubbing
  function step(seq) { seq = Math.max(0, Math.min(view.version, seq)); if (seq !== view.seq) show(seq); }
  function markBefore() { let s = 0; for (const m of view.marks) if (m < view.seq) s = m; return s; }
  function markAfter() { for (const m of view.marks) if (m > view.seq) return m; return view.version; }

  $("slider").addEventListener("input", () => {
    performance.mark("convlog:input", { detail: Number($("slider").value) });
    step(Number($("slider").value));
  });
  $("first").addEventListener("click", () => step(0));
  $("last").addEventListener("click", () => step(view.version));
  $("prev").addEventListener("click", () => step(view.seq - 1));
  $("next").addEventListener("click", () => step(view.seq + 1));
  document.addEventListener("keydown", (e) => {
    if (!view.sid || view.mailbox || e.altKey || e.ctrlKey || e.metaKey ||
        (e.target instanceof HTMLInputElement && e.target.type !== "range") ||
        e.target instanceof HTMLSelectElement || e.target instanceof HTMLTextAreaElement) return;
    const keys = { ArrowLeft: view.seq - 1, ArrowRight: view.seq + 1, PageUp: markBefore(),
      PageDown: markAfter(), Home: 0, End: view.version };
    if (!(e.key in keys)) return;
    e.preventDefault();
    step(keys[e.key]);
  });

  // ------------------------------------------------------------------ branches
  // The session's family as a graph: one row per session, on the seq axis of the root
  // (a fork shares its parent's seqs up to its fork point, so its bar starts there);
  // subagent sessions (imported children) hang under the session that ran them with
  // their own length. Clicking a row opens it.
  function family(sid) {
    const byId = new Map(view.sessions.map((s) => [s.id, s]));
    let root = sid;
    for (let s = byId.get(root); s && (s.parent || s.child_of) && byId.has(s.parent || s.child_of); s = byId.get(root)) {
      root = s.parent || s.child_of;
    }
    const rows = [];
    const walk = (id, depth, kind) => {
      rows.push({ s: byId.get(id), depth: depth, kind: kind });
      for (const o of view.sessions) {
        if (o.parent === id) walk(o.id, depth + 1, "fork");
        else if (!o.parent && o.child_of === id) walk(o.id, depth + 1, "child");
      }
    };
    walk(root, 0, "root");
    return rows;
  }

  function paintBranches() {
    const box = $("branches");
    if (box.hidden || !view.sid) return;
    const rows = family(view.sid);
    const most = Math.max(1, ...rows.map((r) => r.s.version));
    const list = el("div", "branchrows");
    for (const r of rows) {
      const row = el("div", "branch " + r.kind + (r.s.id === view.sid ? " current" : ""));
      row.dataset.sid = r.s.id;
      const label = named("span", "blabel", r.s.title || r.s.id);
      label.style.paddingLeft = r.depth * 12 + "px";
      const track = el("div", "btrack");
      const bar = el("div", "bbar");
      const from = r.kind === "fork" ? r.s.fork_seq : 0;
      bar.style.left = (from / most * 100).toFixed(3) + "%";
      bar.style.width = (Math.max(0.4, (r.s.version - from) / most * 100)).toFixed(3) + "%";
      bar.title = r.kind === "fork" ? "fork at seq " + r.s.fork_seq + ", to seq " + r.s.version
        : r.kind === "child" ? "subagent session, " + r.s.version + " events" : "seq 0 to " + r.s.version;
      track.append(bar);
      const what = r.kind === "fork" ? "fork at " + r.s.fork_seq : r.kind === "child" ? "subagent" : "";
      row.append(label, track, el("span", "small", what));
      row.addEventListener("click", () => openSession(r.s.id, null, true));
      list.append(row);
    }
    box.replaceChildren(el("div", "small", rows.length + " session" + (rows.length === 1 ? "" : "s") +
      " in this family: forks start where they left their parent"), list);
  }
  $("branchbtn").addEventListener("click", () => {
    $("branches").hidden = !$("branches").hidden;
    paintBranches();
  });

  // ------------------------------------------------------------------ diff
  function lineage(sid) {
    const out = [];
    const byId = new Map(view.sessions.map((s) => [s.id, s]));
    let root = sid;
    while (byId.get(root) && byId.get(root).parent && byId.has(byId.get(root).parent)) root = byId.get(root).parent;
    const walk = (id) => { out.push(id); for (const s of view.sessions) if (s.parent === id) walk(s.id); };
    walk(root);
    return out;
  }

  $("diffbtn").addEventListener("click", () => {
    if (!view.sid) return;
    const f = $("diffform");
    f.hidden = !f.hidden;
    for (const sel of [$("dsa"), $("dsb")]) {
      sel.replaceChildren();
      for (const id of lineage(view.sid)) {
        const info = view.sessions.find((x) => x.id === id);
        const name = info && info.title ? reveal(info.title).slice(0, 32) + " · " : "";
        const o = el("option", "", name + id.slice(0, 13));
        o.value = id;
        sel.append(o);
      }
      sel.value = view.sid;
    }
    $("da").value = String(markBefore());
    $("db").value = String(view.seq);
  });
  $("diffclose").addEventListener("click", () => { $("diffform").hidden = true; $("diff").hidden = true; });
  // A diff is a windowed list, like the conversation: rows of one line each (DROW px),
  // only those on screen in the DOM, fetched a page at a time as the list scrolls. A
  // whole long session's diff has tens of thousands of rows.
  const DROW = 22, DPAGE = 200;

  function diffRow(c) {
    const row = el("div", "chg " + c.kind);
    // A fork's diff pairs messages by position after the shared ones (#1, #2…).
    const where = c.position ? "#" + c.position + (c.part_id ? " part" : "") : c.message_id.slice(-8) +
      (c.part_id ? "/" + c.part_id.slice(-8) : "");
    row.append(el("span", "kind", c.kind), el("span", "mono", " " + where + " "));
    if (c.full) row.title = c.full;
    if (c.before || c.after) row.append(document.createTextNode((c.before || "") + " → " + (c.after || "") + " "));
    if (c.detail) row.append(el("span", "small", c.detail + " "));
    if (c.grown) {
      row.append(el("ins", "", c.grown));
      row.title = c.grown.slice(0, 2000);
    }
    return row;
  }

  async function showDiff(sa, a, sb, b) {
    const box = $("diff");
    box.hidden = false;
    box.replaceChildren();
    const first = await src.diff(sa, a, sb, b, 0, DPAGE);
    const total = first.total === undefined ? first.changes.length : first.total;
    const pages = new Map([[0, first.changes]]);
    const head = el("div", "small", "diff " + first.a_session.slice(0, 12) + "@" + first.a + " → " +
      first.b_session.slice(0, 12) + "@" + first.b + ": " + total.toLocaleString("en") + " change(s)" +
      (first.by_position ? "; " + first.shared + " shared message(s) diffed as one, the rest paired by position after them" : ""));
    const rows = el("div", "diff-rows");
    const spacer = el("div", "diff-spacer");
    spacer.style.height = total * DROW + "px";
    const body = el("div", "diff-body");
    rows.dataset.total = String(total);
    rows.append(spacer, body);
    box.append(head, rows);
    let shown = "";
    const loading = new Set();
    function paint() {
      const from = Math.max(0, Math.floor(rows.scrollTop / DROW) - 10);
      const to = Math.min(total, from + Math.ceil(rows.clientHeight / DROW) + 20);
      const nodes = [];
      for (let i = from; i < to; i++) {
        const page = Math.floor(i / DPAGE) * DPAGE;
        const got = pages.get(page);
        if (!got) {
          if (!loading.has(page)) {
            loading.add(page);
            src.diff(sa, a, sb, b, page, DPAGE).then((d) => { pages.set(page, d.changes); shown = ""; paint(); },
              () => loading.delete(page));
          }
          nodes.push(el("div", "chg placeholder", "…"));
          continue;
        }
        const row = diffRow(got[i - page]);
        row.dataset.index = String(i);
        nodes.push(row);
      }
      const key = from + ":" + to + ":" + nodes.filter((n) => n.classList.contains("placeholder")).length;
      if (key === shown) return;
      shown = key;
      body.style.top = from * DROW + "px";
      body.replaceChildren(...nodes);
    }
    rows.addEventListener("scroll", () => requestAnimationFrame(paint));
    paint();
  }

  $("diffform").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await showDiff($("dsa").value, Number($("da").value), $("dsb").value, Number($("db").value));
    } catch (err) { $("diff").replaceChildren(el("div", "err", String(err.message || err))); }
  });

  // ------------------------------------------------------------------ fork
  $("forkbtn").addEventListener("click", async () => {
    try {
      const f = await src.fork(view.sid, view.seq, token);
      await loadSessions();
      await openSession(f.id, null, true);
    } catch (err) { banner("fork failed: " + (err.message || err)); }
  });

  // ------------------------------------------------------------------ mailbox
  async function loadMailbox() {
    let mb;
    try { mb = await src.mailbox(); } catch (err) { return null; }
    view.mailboxInfo = mb;
    const list = $("projects");
    list.replaceChildren();
    $("mailboxes").hidden = !mb.present;
    for (const p of mb.projects) {
      const li = el("li");
      const a = el("a", "sess proj" + (view.mailbox && view.mailbox.project === p.id ? " current" : ""));
      a.href = "?mailbox=" + enc(p.id);
      a.dataset.project = p.id;
      a.append(el("div", "id", p.name || p.id));
      a.append(el("div", "meta", p.agents + " agents · " + p.messages + " messages"));
      a.addEventListener("click", (e) => { e.preventDefault(); openMailbox(p.id, null, true); });
      li.append(a);
      list.append(li);
    }
    return mb;
  }

  function closeMailbox() {
    if (!view.mailbox) return;
    view.mailbox = null;
    for (const a of document.querySelectorAll(".proj.current")) a.classList.remove("current");
  }

  async function openMailbox(project, agent, push) {
    view.pending++;  // an answer for a session still on its way paints nothing now
    view.mailbox = { project: project, agent: agent, version: -1 };
    view.sid = null;
    showSessionView(false);
    $("mailbox").hidden = false;
    renderTree();
    await loadMailbox();
    setURL(push);
    await paintMailbox();
    const mb = view.mailboxInfo;
    if (mb && mb.present) {
      liveFeed(mb.session, $("mblive"), (v) => {
        if (!view.mailbox || view.mailbox.project !== project || v === view.mailbox.version) return;
        paintMailbox();
        loadMailbox();
      });
    }
  }

  function threads(messages) {
    const byThread = new Map();
    for (const m of messages) {
      if (!byThread.has(m.thread)) byThread.set(m.thread, []);
      byThread.get(m.thread).push(m);
    }
    return [...byThread.values()];
  }

  async function paintMailbox() {
    const mbv = view.mailbox;
    if (!mbv) return;
    const box = $("mailbox");
    let d;
    try { d = await src.project(mbv.project, mbv.agent); } catch (err) {
      if (view.mailbox !== mbv) return;
      box.replaceChildren(el("div", "empty err", "cannot show the mailbox: " + (err.message || err)));
      return;
    }
    if (view.mailbox !== mbv) return;
    mbv.version = d.version;
    banner("");
    const head = el("div", "mb-head");
    head.append(el("strong", "", "mailbox · " + (d.project.name || d.project.id)));
    if (d.project.working_directory) head.append(el("span", "small mono", d.project.working_directory));
    const live = $("mblive") || el("span", "badge live");
    live.id = "mblive";
    head.append(live);
    const chips = el("div", "agents");
    const all = el("button", "agent" + (mbv.agent ? "" : " current"), "all agents");
    all.type = "button";
    all.addEventListener("click", () => openMailbox(mbv.project, null, true));
    chips.append(all);
    for (const a of d.agents) {
      const b = el("button", "agent" + (a.id === mbv.agent ? " current" : "") + (a.assigned ? "" : " gone"),
        (a.name || a.id) + (a.unread ? " · " + a.unread + " unread" : ""));
      b.type = "button";
      b.dataset.agent = a.id;
      b.title = a.id + (a.assigned ? "" : " (no longer in the project)");
      b.addEventListener("click", () => openMailbox(mbv.project, a.id, true));
      chips.append(b);
    }
    const list = el("div", "threads");
    if (!d.messages.length) list.append(el("div", "empty", "no messages" + (mbv.agent ? " for " + mbv.agent : "")));
    if (d.total > d.messages.length) list.append(el("div", "small", (d.total - d.messages.length) + " earlier messages not shown"));
    for (const t of threads(d.messages)) {
      const th = el("section", "thread");
      th.dataset.thread = t[0].thread;
      for (const m of t) {
        const row = el("article", "mail" + (m.reply_to ? " reply" : ""));
        row.dataset.mail = m.id;
        const mh = el("div", "msg-head");
        mh.append(el("span", "role", m.sender), el("span", "", "→ " + m.receivers.join(", ")),
          el("span", "", fmtTime(m.created_at)));
        if (m.broadcast) mh.append(el("span", "small", "broadcast"));
        if (m.related_task_id) mh.append(el("span", "small", "task " + m.related_task_id));
        row.append(mh, el("div", "part text", m.content));
        const rc = el("div", "receipts");
        for (const r of m.receivers) {
          const s = el("span", "st " + m.receipts[r], r + ": " + m.receipts[r]);
          s.dataset.receiver = r;
          rc.append(s);
        }
        row.append(rc);
        th.append(row);
      }
      list.append(th);
    }
    box.replaceChildren(head, chips, list);
    document.body.dataset.mailboxVersion = String(d.version);
  }

  // ------------------------------------------------------------------ start
  async function route(push) {
    const q = new URLSearchParams(location.search);
    if (q.get("mailbox") && !EXPORT) return openMailbox(q.get("mailbox"), q.get("agent"), push);
    const sid = q.get("session") || (view.sessions.length === 1 || EXPORT ? view.sessions[0].id : null);
    const raw = q.get("seq");
    const seq = raw === null || raw === "" ? null : Number(raw);
    if (sid) return openSession(sid, seq, push);
    showSessionView(true);
    view.sid = null;
    resetList(null);
    $("note").hidden = false;
    $("note").textContent = view.sessions.length ? "pick a session on the left" : "this store has no sessions yet";
  }

  window.addEventListener("popstate", () => { route(false); });

  // The store's own feed: any append anywhere (a session another process is importing
  // with `import --follow` or recording) lists the sessions again, so a new session
  // shows up and a growing one's counts move; the open session follows its own feed.
  let storeTimer = 0;
  function watchStore() {
    if (EXPORT || !window.EventSource) return;
    const es = new EventSource("/api/live");
    // The feed's first message is the position now, not a change. The list is read
    // again when the position differs from the one the list was read at: an append
    // that landed between the list and this feed's start (a follower that wrote
    // while the page was loading) is not missed.
    es.onmessage = (e) => {
      let position = null;
      try { position = JSON.parse(e.data).position; } catch (err) { position = null; }
      if (position !== null && position === view.listedAt) return;
      clearTimeout(storeTimer);
      storeTimer = setTimeout(async () => {
        try { await loadSessions(); } catch (err) { return; }
        if (!view.sid && !view.mailbox) {
          $("note").hidden = false;
          $("note").textContent = view.sessions.length ? "pick a session on the left" : "this store has no sessions yet";
        } else if (view.sid && !view.mailbox) sessionHeader(view.sid);
      }, 300);
    };
  }

  (async () => {
    let cfg;
    const q = new URLSearchParams(location.search);
    const direct = !EXPORT && q.get("session") && !q.get("mailbox");
    let listed = null;
    const listing = () => listed || (listed = loadSessions());
    let opened = null;
    if (direct) {
      const raw = q.get("seq");
      opened = openEarly(q.get("session"), raw === null || raw === "" ? null : Number(raw), listing);
    } else listing();
    try {
      cfg = await src.config();
      if (opened) await opened;
      await listing();
    } catch (err) {
      banner("cannot reach the viewer's server: " + (err.message || err));
      return;
    }
    view.writes = cfg.writes;
    $("forkbtn").hidden = !(cfg.writes && token);
    if (cfg.exported) { $("diffbtn").hidden = true; $("search").hidden = true; $("find").hidden = true; }
    const missing = (cfg.anchors || []).filter((a) => !a.present);
    if (opened) {
      if (view.sid && !view.mailbox) {
        sessionHeader(view.sid);
        // Painted before the list was in: a message with a call that ran a subagent is
        // drawn again, with its link (the list names the child); the others stay.
        let stale = false;
        for (const [i, [m]] of vl.nodes) {
          if (m.parts.some((p) => p.type === "tool" && childSession(p))) { vl.nodes.delete(i); stale = true; }
        }
        if (stale && view.state) { vl.rendered = ""; renderList(); }
      }
      renderTree();
      paintBranches();
      await loadMailbox();
    } else {
      await loadMailbox();
      await route(false);
    }
    watchStore();
    if (missing.length) {
      $("anchorwarn").hidden = false;
      $("anchorwarn").textContent = "✗ anchored session(s) missing from the store (removed?): " +
        missing.map((a) => a.session + " (anchored at seq " + a.seq + ")").join(", ");
    }
  })();
})();
