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

  // ------------------------------------------------------------------ data sources
  async function getJSON(url, opts) {
    const r = await fetch(url, opts);
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }
  const api = {
    config: () => getJSON("/api/config"),
    sessions: () => getJSON("/api/sessions"),
    search: (q) => getJSON("/api/search?q=" + encodeURIComponent(q)),
    state: (sid, seq, start) => getJSON("/api/sessions/" + encodeURIComponent(sid) +
      "/state?seq=" + seq + (start === undefined ? "" : "&start=" + start)),
    verify: (sid) => getJSON("/api/sessions/" + encodeURIComponent(sid) + "/verify"),
    diff: (sa, a, sb, b) => getJSON("/api/sessions/" + encodeURIComponent(sa) + "/diff?a=" + a +
      "&b=" + b + "&b_session=" + encodeURIComponent(sb)),
    fork: (sid, seq, token) => getJSON("/api/sessions/" + encodeURIComponent(sid) + "/fork", {
      method: "POST", headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token },
      body: JSON.stringify({ seq: seq }) }),
  };

  // An exported file carries every state as message versions: states[seq] lists indexes
  // into versions, so the scrubber works offline without folding events in JS.
  function exportSource(data) {
    const WINDOW = data.window;
    const s = data.session;
    return {
      config: async () => ({ writes: false, exported: true }),
      sessions: async () => [s.info],
      search: async () => [],
      verify: async () => data.verify,
      diff: async () => { throw new Error("diff needs the server"); },
      state: async (sid, seq, start) => {
        const all = s.states[seq].map((i) => s.versions[i]);
        const ev = seq ? s.events[seq - 1] : null;
        let focus = all.length - 1;
        if (ev && ev.message_id) {
          const i = all.findIndex((m) => m.info.id === ev.message_id);
          if (i >= 0) focus = i;
        }
        if (start === undefined) start = Math.max(0, focus - WINDOW / 2);
        start = Math.max(0, Math.min(start, Math.max(0, all.length - WINDOW)));
        return { session: sid, seq: seq, version: s.info.version, total: all.length, start: start,
          focus: focus, window: WINDOW, messages: all.slice(start, start + WINDOW), event: ev,
          marks: s.marks };
      },
    };
  }
  const src = EXPORT ? exportSource(JSON.parse(EXPORT.textContent)) : api;

  // ------------------------------------------------------------------ state
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const view = { sid: null, seq: 0, version: 0, marks: [], state: null, sessions: [],
    verify: null, writes: false, following: false, pending: 0, live: null };

  function setURL() {
    const q = new URLSearchParams({ session: view.sid, seq: String(view.seq) });
    history.replaceState(null, "", "?" + q.toString() + location.hash);
  }

  // ------------------------------------------------------------------ sessions tree
  function fmtTime(ms) { return new Date(ms).toISOString().replace("T", " ").slice(0, 19); }

  function renderTree() {
    const tree = $("tree");
    tree.replaceChildren();
    const kids = new Map();
    for (const s of view.sessions) {
      const p = s.parent && view.sessions.some((o) => o.id === s.parent) ? s.parent : "";
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(s);
    }
    const add = (ul, parent) => {
      for (const s of kids.get(parent) || []) {
        const li = el("li");
        const a = el("a", "sess" + (s.id === view.sid ? " current" : ""));
        a.href = "?session=" + encodeURIComponent(s.id);
        a.dataset.sid = s.id;
        a.append(el("div", "id", s.id));
        const fork = s.parent ? " · fork at " + s.fork_seq : "";
        a.append(el("div", "meta", s.version + " events" + fork + " · " + fmtTime(s.updated)));
        a.addEventListener("click", (e) => { e.preventDefault(); openSession(s.id, null); });
        li.append(a);
        if (kids.has(s.id)) { const sub = el("ul", "tree"); add(sub, s.id); li.append(sub); }
        ul.append(li);
      }
    };
    add(tree, "");
  }

  async function loadSessions() {
    view.sessions = await src.sessions();
    renderTree();
  }

  let searchTimer = 0;
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(async () => {
      const q = $("search").value.trim();
      const box = $("hits");
      box.replaceChildren();
      if (!q) return;
      const hits = await src.search(q);
      if (!hits.length) box.append(el("div", "hit", "no match"));
      for (const h of hits) {
        const d = el("div", "hit");
        d.dataset.sid = h.session;
        const i = h.snippet.toLowerCase().indexOf(q.toLowerCase());
        d.append(el("div", "id mono", h.session.slice(0, 18) + "…"));
        if (i >= 0) {
          d.append(document.createTextNode(h.snippet.slice(0, i)), el("mark", "", h.snippet.slice(i, i + q.length)),
            document.createTextNode(h.snippet.slice(i + q.length)));
        } else d.append(document.createTextNode(h.snippet));
        d.addEventListener("click", () => openSession(h.session, null));
        box.append(d);
      }
    }, 200);
  });

  // ------------------------------------------------------------------ parts
  function json(v) { return typeof v === "string" ? v : JSON.stringify(v, null, 2); }

  function details(cls, summary, body, open) {
    const d = el("details", cls);
    d.append(el("summary", "", summary));
    if (body) d.append(body);
    if (open) d.open = true;
    return d;
  }

  function renderPart(p) {
    let n;
    switch (p.type) {
      case "text":
        n = el("div", "part text", p.text);
        break;
      case "reasoning": {
        n = details("part reasoning", "reasoning · " + p.text.length + " chars", el("div", "body", p.text));
        break;
      }
      case "tool": {
        n = el("div", "part tool");
        const head = el("div", "tool-head");
        head.append(el("span", "name", p.tool), el("span", "st " + p.state.status, p.state.status));
        if (p.approval) head.append(el("span", "st " + p.approval.state, "approval " + p.approval.state));
        if (p.state.title) head.append(el("span", "", p.state.title));
        n.append(head);
        const input = p.state.status === "pending" ? (p.state.raw || json(p.state.input)) : json(p.state.input);
        n.append(details("", "input", el("pre", "", input)));
        if (p.state.status === "completed") n.append(details("", "output", el("pre", "", p.state.output), true));
        if (p.state.status === "error") n.append(el("pre", "err", p.state.error));
        if (p.approval && p.approval.reason) n.append(el("div", "small", "approval reason: " + p.approval.reason));
        break;
      }
      case "file":
        n = el("div", "part file", "📎 " + (p.filename || p.url) + " · " + p.mime);
        break;
      case "step-start":
        n = el("div", "part step", "step started" + (p.snapshot ? " · snapshot " + p.snapshot : ""));
        break;
      case "step-finish": {
        const t = p.tokens;
        n = el("div", "part step", "step finished (" + p.reason + ") · cost $" + p.cost.toFixed(4) +
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
        n = el("div", "part small", "patch " + p.hash + ": " + p.files.join(", "));
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
    if (info.agent) head.append(el("span", "", info.agent));
    const model = info.model ? info.model.model_id : info.model_id;
    if (model) head.append(el("span", "", model));
    head.append(el("span", "", fmtTime(info.time.created)));
    if (info.role === "assistant") {
      head.append(el("span", "", info.time.completed ? "completed" + (info.finish ? " · " + info.finish : "") : "streaming…"));
      if (info.cost) head.append(el("span", "", "$" + info.cost.toFixed(4)));
      if (info.error) head.append(el("span", "err", "error " + info.error.kind + ": " + info.error.message));
    }
    box.append(head);
    for (const p of m.parts) box.append(renderPart(p));
    return box;
  }

  // ------------------------------------------------------------------ conversation
  function describe(ev) {
    if (!ev) return "seq 0: the empty session";
    const bits = [];
    for (const k of ["message_id", "part_id", "role", "tool", "delta", "fragment", "output", "error", "reason"]) {
      if (ev[k] !== undefined && ev[k] !== null && ev[k] !== "") {
        let v = typeof ev[k] === "string" ? ev[k] : JSON.stringify(ev[k]);
        if (v.length > 80) v = v.slice(0, 80) + "…";
        bits.push(k + "=" + v);
      }
    }
    return bits.join("  ");
  }

  function renderState(st) {
    const conv = $("conv");
    conv.replaceChildren();
    if (st.start > 0) {
      const b = el("button", "more", "↑ " + st.start + " earlier messages");
      b.addEventListener("click", () => show(view.seq, Math.max(0, st.start - st.window)));
      conv.append(b);
    }
    if (!st.total) conv.append(el("div", "empty", "no messages yet at seq " + st.seq));
    for (const m of st.messages) conv.append(renderMessage(m));
    const after = st.total - st.start - st.messages.length;
    if (after > 0) {
      const b = el("button", "more", "↓ " + after + " later messages");
      b.addEventListener("click", () => show(view.seq, st.start + st.window));
      conv.append(b);
    }
    const evBox = $("event");
    evBox.replaceChildren(el("b", "", st.event ? "#" + st.seq + " " + st.event.tag : "#0"),
      document.createTextNode("  " + describe(st.event)));
    $("seqlabel").textContent = "seq " + st.seq + " / " + st.version;
    const ev = st.event;
    let target = null;
    if (ev && ev.message_id) {
      const m = conv.querySelector('[data-msg="' + CSS.escape(ev.message_id) + '"]');
      target = m;
      if (m && ev.part_id) target = m.querySelector('[data-part="' + CSS.escape(ev.part_id) + '"]') || m;
    }
    if (target) { target.classList.add("hl"); target.scrollIntoView({ block: "nearest" }); }
    renderVerify();
  }

  function renderVerify() {
    const b = $("verify");
    const v = view.verify;
    if (!v) { b.textContent = ""; return; }
    if (view.seq <= v.verified_upto) {
      b.className = "badge ok";
      b.textContent = "✓ chain verified to seq " + view.seq;
    } else if (v.ok) {
      b.className = "badge";
      b.textContent = "chain verified to seq " + v.verified_upto;
    } else {
      b.className = "badge bad";
      b.textContent = "✗ chain broken after seq " + v.verified_upto;
      b.title = v.problem || "";
    }
  }

  // Only the latest request paints: a fast scrub never shows an older answer last.
  async function show(seq, start) {
    const ticket = ++view.pending;
    view.seq = seq;
    $("slider").value = String(seq);
    setURL();
    const st = await src.state(view.sid, seq, start);
    if (ticket !== view.pending) return;
    view.state = st;
    view.version = st.version;
    view.marks = st.marks;
    $("slider").max = String(st.version);
    renderState(st);
    document.body.dataset.shownSeq = String(st.seq);
  }

  async function openSession(sid, seq) {
    view.sid = sid;
    $("title").textContent = sid;
    renderTree();
    $("diff").hidden = true;
    view.verify = null;
    const first = await src.state(sid, seq === null ? 0 : seq);
    view.version = first.version;
    $("slider").max = String(first.version);
    await show(seq === null ? first.version : Math.min(seq, first.version));
    src.verify(sid).then((v) => { view.verify = v; renderVerify(); });
    follow(sid);
  }

  // ------------------------------------------------------------------ live
  function follow(sid) {
    if (view.live) view.live.close();
    view.live = null;
    if (EXPORT || !window.EventSource) return;
    const es = new EventSource("/api/sessions/" + encodeURIComponent(sid) + "/live");
    view.live = es;
    es.onopen = () => { $("live").textContent = "● live"; $("live").className = "badge ok"; };
    es.onerror = () => { $("live").textContent = "○ offline"; $("live").className = "badge"; };
    es.onmessage = (m) => {
      const v = JSON.parse(m.data).version;
      if (sid !== view.sid || v === view.version) return;
      const atEnd = view.seq === view.version;
      view.version = v;
      $("slider").max = String(v);
      $("seqlabel").textContent = "seq " + view.seq + " / " + v;
      if (atEnd) show(v);
      src.verify(sid).then((r) => { view.verify = r; renderVerify(); });
      loadSessions();
    };
  }

  // ------------------------------------------------------------------ scrubbing
  function step(seq) { seq = Math.max(0, Math.min(view.version, seq)); if (seq !== view.seq) show(seq); }
  function markBefore() { let s = 0; for (const m of view.marks) if (m < view.seq) s = m; return s; }
  function markAfter() { for (const m of view.marks) if (m > view.seq) return m; return view.version; }

  $("slider").addEventListener("input", () => step(Number($("slider").value)));
  $("first").addEventListener("click", () => step(0));
  $("last").addEventListener("click", () => step(view.version));
  $("prev").addEventListener("click", () => step(view.seq - 1));
  $("next").addEventListener("click", () => step(view.seq + 1));
  document.addEventListener("keydown", (e) => {
    if (!view.sid || (e.target instanceof HTMLInputElement && e.target.type !== "range") ||
        e.target instanceof HTMLSelectElement) return;
    const keys = { ArrowLeft: view.seq - 1, ArrowRight: view.seq + 1, PageUp: markBefore(),
      PageDown: markAfter(), Home: 0, End: view.version };
    if (!(e.key in keys)) return;
    e.preventDefault();
    step(keys[e.key]);
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
    const f = $("diffform");
    f.hidden = !f.hidden;
    for (const sel of [$("dsa"), $("dsb")]) {
      sel.replaceChildren();
      for (const id of lineage(view.sid)) {
        const o = el("option", "", id.slice(0, 24));
        o.value = id;
        sel.append(o);
      }
      sel.value = view.sid;
    }
    $("da").value = String(markBefore());
    $("db").value = String(view.seq);
  });
  $("diffclose").addEventListener("click", () => { $("diffform").hidden = true; $("diff").hidden = true; });
  $("diffform").addEventListener("submit", async (e) => {
    e.preventDefault();
    const box = $("diff");
    box.hidden = false;
    box.replaceChildren();
    try {
      const d = await src.diff($("dsa").value, Number($("da").value), $("dsb").value, Number($("db").value));
      box.append(el("div", "small", "diff " + d.a_session.slice(0, 12) + "@" + d.a + " → " +
        d.b_session.slice(0, 12) + "@" + d.b + ": " + d.changes.length + " change(s)"));
      for (const c of d.changes) {
        const row = el("div", "chg " + c.kind);
        row.append(el("span", "kind", c.kind), el("span", "mono", " " + c.message_id.slice(-8) +
          (c.part_id ? "/" + c.part_id.slice(-8) : "") + " "));
        if (c.before || c.after) row.append(document.createTextNode((c.before || "") + " → " + (c.after || "") + " "));
        if (c.detail) row.append(el("span", "small", c.detail + " "));
        if (c.grown) row.append(el("ins", "", c.grown));
        box.append(row);
      }
    } catch (err) { box.append(el("div", "err", String(err.message || err))); }
  });

  // ------------------------------------------------------------------ fork
  $("forkbtn").addEventListener("click", async () => {
    try {
      const f = await src.fork(view.sid, view.seq, token);
      await loadSessions();
      await openSession(f.id, null);
    } catch (err) { $("event").textContent = "fork failed: " + (err.message || err); }
  });

  // ------------------------------------------------------------------ start
  (async () => {
    const cfg = await src.config();
    view.writes = cfg.writes;
    $("forkbtn").hidden = !(cfg.writes && token);
    if (cfg.exported) { $("diffbtn").hidden = true; $("search").hidden = true; }
    await loadSessions();
    const q = new URLSearchParams(location.search);
    const sid = q.get("session") || (view.sessions.length === 1 || EXPORT ? view.sessions[0].id : null);
    const seq = q.get("seq");
    if (sid) await openSession(sid, seq === null ? null : Number(seq));
    else $("conv").replaceChildren(el("div", "empty", "pick a session on the left"));
  })();
})();
