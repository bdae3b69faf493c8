// wire-ui: the page. Everything from a recording is put in the DOM as text (textContent, text
// nodes), never as HTML. Served by wire-ui (data from /api/...) or embedded in a file written by
// `wire-show --html` (data in a <script type="application/json" id="wr-data"> element).
"use strict";
(function () {
  const EMBED = document.getElementById("wr-data");
  const STATIC = EMBED ? JSON.parse(EMBED.textContent) : null;
  const $main = document.getElementById("main");
  const $crumbs = document.getElementById("crumbs");
  const $status = document.getElementById("status");
  let liveTimer = null;

  // Recorded text is shown, never obeyed: C0 controls (but line breaks and tabs) as their control
  // pictures, DEL, C1 and the bidi controls (U+202E...) as U+FFFD, as recorder/visible.py does.
  const vis = (s) => String(s).replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
    (c) => { const n = c.charCodeAt(0); return n < 0x20 ? String.fromCharCode(0x2400 + n) : n === 0x7f ? "\u2421" : "\ufffd"; });

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, vis(v));
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.appendChild(typeof k === "object" ? k : document.createTextNode(vis(k)));
    }
    return e;
  }
  const fmtMs = (ms) => ms === null || ms === undefined ? "" :
    ms < 1 ? ms.toFixed(2) + " ms" : ms < 1000 ? Math.round(ms) + " ms" :
    ms < 60000 ? (ms / 1000).toFixed(2) + " s" : Math.floor(ms / 60000) + " min " + Math.round(ms % 60000 / 1000) + " s";
  const num = (v) => v === null || v === undefined ? "" : Number(v).toLocaleString("en");
  const proto = (p) => el("span", {class: "proto " + (["wire", "acp", "mcp"].includes(p) ? p : "none")}, p || "?");

  // -- data: the server's API, or the embedded data of a static page --------------------------
  async function api(name, params) {
    if (STATIC) return staticApi(name, params || {});
    const q = new URLSearchParams(params || {}).toString();
    const r = await fetch("/api/" + name + (q ? "?" + q : ""), {credentials: "same-origin"});
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }
  function staticApi(name, p) {
    const S = STATIC;
    if (name === "index") {
      const words = [...(p.q || "").toLowerCase().matchAll(/"([^"]+)"|(\S+)/g)].map((m) => m[1] || m[2]);
      let rows = S.index.filter((r) => (!p.protocol || r.protocol === p.protocol) &&
        (p.errors !== "1" || r.errors || r.anomalies) &&
        words.every((w) => (r._text + " " + (r.name || "") + " " + r.session_id).toLowerCase().includes(w)));
      const key = p.sort || "started_at", desc = p.desc !== "0";
      rows = rows.slice().sort((a, b) => (a[key] > b[key] ? 1 : a[key] < b[key] ? -1 : 0) * (desc ? -1 : 1));
      const off = Number(p.offset || 0);
      return {ready: true, total: S.index.length, matched: rows.length, offset: off,
              rows: rows.slice(off, off + 100), protocols: [...new Set(S.index.map((r) => r.protocol))].sort(),
              problems: [], reports: []};
    }
    const s = S.sessions[p.k];
    if (!s) throw new Error("no such session");
    if (name === "session") return Object.assign({}, s, {items: s.items.slice(0, 2000), items_total: s.items.length});
    if (name === "items") return {items: s.items.slice(Number(p.from), Number(p.from) + Number(p.n || 2000)), items_total: s.items.length, live: false};
    if (name === "frames") {
      const lo = Number(p.seq), hi = lo + Number(p.n || 100) - 1;
      return {frames: s.frames.filter((f) => f.seq >= lo && f.seq <= hi)};
    }
    if (name === "related") {
      // as the server's related.sql: the frames naming the item's tool call, else the frame's
      // JSON-RPC partners, else the frame alone
      const seq = Number(p.seq), f = s.frames.find((x) => x.seq === seq);
      if (!f) return {frames: []};
      const text = (x) => x._text ?? (x._text = x.raw_b64 ? new TextDecoder().decode(b64bytes(x.raw_b64)) : "");
      const names = (x, id) => text(x).includes(JSON.stringify(id));
      const call = (s.calls.find(([cs]) => cs === seq) || s.calls.find(([, id]) => names(f, id)) || [])[1];
      const rpc = (x) => x.direction === "c2a" || x.direction === "a2c";
      return {frames: s.frames.filter((x) => x.seq === seq || (rpc(x) && (call !== undefined
        ? x.rpc_id === call || names(x, call) : f.rpc_id !== null && x.rpc_id === f.rpc_id)))};
    }
    throw new Error("not in this file");
  }

  function stopLive() { if (liveTimer) { clearTimeout(liveTimer); liveTimer = null; } }

  function route() {
    stopLive();
    const h = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
    if (h.startsWith("s/")) {
      const rest = h.slice(2), at = rest.indexOf("/f/");
      return at >= 0 ? showSession(rest.slice(0, at), Number(rest.slice(at + 3))) : showSession(rest, null);
    }
    if (h.startsWith("r/")) return showReport(Number(h.slice(2)));
    if (STATIC && STATIC.only) return showSession(STATIC.only, null);
    return showIndex();
  }
  window.addEventListener("hashchange", route);
  // replaceChildren turns a null into the text "null": leave the absent ones out
  const put = (node, ...kids) => node.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
  function fail(e) { put($main, el("p", {class: "bad"}, String(e.message || e))); }

  // -- index -----------------------------------------------------------------------------------
  const state = {q: "", protocol: "", tag: "", errors: false, from: "", to: "", sort: "started_at", desc: true, offset: 0};
  const COLS = [["name", "session"], ["protocol", "protocol"], ["agent", "agent"], ["started_at", "start"],
    ["duration_ms", "duration"], ["turns", "turns"], ["tokens", "tokens"], ["tool_calls", "tool calls"],
    ["errors", "errors"], [null, "tags"], ["source_file", "file"]];

  async function showIndex() {
    $crumbs.textContent = vis("sessions");
    const search = el("input", {type: "search", id: "q", placeholder: 'search prompts and messages ("a phrase")', value: state.q});
    const sel = el("select", {id: "proto"}, el("option", {value: ""}, "all protocols"));
    const tag = el("input", {type: "text", id: "tag", placeholder: "tag key=value", size: 14, value: state.tag});
    const errs = el("input", {type: "checkbox", id: "errs"}); errs.checked = state.errors;
    const from = el("input", {type: "date", id: "from", value: state.from});
    const to = el("input", {type: "date", id: "to", value: state.to});
    const count = el("span", {class: "muted", id: "count"});
    const reports = el("span", {id: "reports"});
    const table = el("table", {class: "idx", id: "idx"});
    const pager = el("div", {class: "pager"});
    let timer = null;
    const again = () => { clearTimeout(timer); timer = setTimeout(() => { state.offset = 0; load(); }, 150); };
    search.addEventListener("input", () => { state.q = search.value; again(); });
    tag.addEventListener("input", () => { state.tag = tag.value; again(); });
    sel.addEventListener("change", () => { state.protocol = sel.value; again(); });
    errs.addEventListener("change", () => { state.errors = errs.checked; again(); });
    from.addEventListener("change", () => { state.from = from.value; again(); });
    to.addEventListener("change", () => { state.to = to.value; again(); });
    const reload = el("button", {onclick: () => load(true)}, "reload");
    put($main, el("div", {class: "bar"}, search, sel, tag, el("label", {}, errs, " errors"),
      "from", from, "to", to, STATIC ? null : reload, count, reports), table, pager);

    async function load(refresh) {
      const p = {q: state.q, protocol: state.protocol, tag: state.tag, errors: state.errors ? "1" : "0",
                 from: state.from, to: state.to, sort: state.sort, desc: state.desc ? "1" : "0", offset: state.offset};
      if (refresh) p.refresh = "1";
      let d;
      try { d = await api("index", p); } catch (e) { return fail(e); }
      // the first build serves what it has read so far: shown, with the count of files read
      const reading = d.ready ? "" : "reading the recordings…" +
        (d.progress && d.progress.of ? ` ${num(d.progress.read)} of ${num(d.progress.of)} files` : "");
      if (!d.ready && !d.total) { count.textContent = vis(reading); return setTimeout(load, 300); }
      for (const pr of d.protocols) if (![...sel.options].some((o) => o.value === pr)) sel.appendChild(el("option", {value: pr}, pr));
      // rows come first, the search text of every file after them
      const indexing = d.search && !d.search.ready ? "search is still being built" +
        (d.search.of ? ` (${num(d.search.read)} of ${num(d.search.of)} files): results may be missing` : "") : "";
      count.textContent = vis(`${num(d.matched)} of ${num(d.total)} sessions` + (reading ? " · " + reading : "") + (indexing ? " · " + indexing : "") + (d.problems.length ? " · " + d.problems.join("; ") : ""));
      put(reports, ...(d.reports || []).map((n, i) => el("a", {href: "#r/" + i, class: "report"}, "replay report " + n + " ")));
      const head = el("tr", {}, COLS.map(([k, label]) => el("th", {onclick: k ? () => {
        if (state.sort === k) state.desc = !state.desc; else { state.sort = k; state.desc = k === "started_at"; }
        load(); } : null}, label + (state.sort === k ? (state.desc ? " ▾" : " ▴") : ""))));
      // while something is being recorded, the index follows (new sessions, ended ones)
      stopLive();
      if (!d.ready || indexing) liveTimer = setTimeout(() => load(), 1000);
      else if (!STATIC && d.rows.some((r) => r.live)) liveTimer = setTimeout(() => load(true), 3000);
      const rows = d.rows.map((r) => el("tr", {class: "row", "data-key": r.key, onclick: () => { location.hash = "#s/" + encodeURIComponent(r.key); }},
        el("td", {}, el("a", {href: "#s/" + encodeURIComponent(r.key)}, r.name || r.session_id.slice(0, 12)),
           r.live ? el("span", {class: "live"}, " ● live") : null,
           r.name && r.name !== r.session_id ? el("div", {class: "muted mono"}, r.session_id.slice(0, 16)) : null),
        el("td", {}, proto(r.protocol)), el("td", {}, r.agent || ""), el("td", {class: "mono"}, r.started_at || ""),
        el("td", {class: "n"}, fmtMs(r.duration_ms)), el("td", {class: "n"}, num(r.turns)),
        el("td", {class: "n"}, num(r.tokens)), el("td", {class: "n"}, num(r.tool_calls)),
        el("td", {class: "n" + (r.errors ? " bad" : "")}, num(r.errors) + (r.anomalies ? ` (+${r.anomalies} anomalies)` : "")),
        el("td", {}, tagList(r.tags)), el("td", {class: "muted mono"}, (r.source_file || "").split("/").pop())));
      put(table, el("thead", {}, head), el("tbody", {}, rows));
      put(pager, 
        state.offset > 0 ? el("button", {onclick: () => { state.offset = Math.max(0, state.offset - 100); load(); }}, "‹ previous") : null,
        d.matched > state.offset + d.rows.length ? el("button", {onclick: () => { state.offset += 100; load(); }}, "next ›") : null,
        el("span", {class: "muted"}, d.matched ? ` ${state.offset + 1}–${state.offset + d.rows.length}` : " nothing matches"));
    }
    load();
  }
  function tagList(tags) {
    if (!tags) return [];
    if (Array.isArray(tags)) return tags.map((t) => el("span", {class: "tag"}, String(t)));
    if (typeof tags === "object") return Object.entries(tags).map(([k, v]) => el("span", {class: "tag"}, k + "=" + (typeof v === "string" ? v : JSON.stringify(v))));
    return [el("span", {class: "tag"}, String(tags))];
  }

  // -- session view ----------------------------------------------------------------------------
  const CARDS = {
    wire: [["turns", "turns"], ["steps", "steps"], ["tokens", "tokens"], ["tool_calls", "tool calls"], ["tool_errors", "failed calls"],
           ["client_requests", "approvals & requests"], ["client_wait_ms", "human wait", fmtMs], ["errors", "errors"], ["anomalies", "anomalies"], ["frames", "frames"]],
    acp: [["turns", "prompts"], ["tool_calls", "tool calls"], ["tool_errors", "failed calls"], ["client_requests", "requests to the client"],
          ["client_wait_ms", "client wait", fmtMs], ["errors", "errors"], ["anomalies", "anomalies"], ["frames", "frames"]],
    mcp: [["tool_calls", "tool calls"], ["tool_errors", "failed calls"], ["tool_p50_ms", "p50 call", fmtMs], ["rpc_requests", "requests"],
          ["client_requests", "server → client requests"], ["client_wait_ms", "client wait", fmtMs], ["errors", "errors"], ["anomalies", "anomalies"], ["frames", "frames"]],
  };

  async function showSession(key, jump) {
    // the conversation and the rest are asked for at once (the server answers both in
    // parallel); each is drawn as soon as it comes
    const pSession = api("session", {k: key}), pItems = api("items", {k: key, from: 0, n: 500});
    pSession.catch(() => {}); pItems.catch(() => {});
    const headBox = el("div", {id: "head"}, el("p", {class: "muted"}, "reading the session…"));
    const charts = el("div", {id: "charts"});
    const conv = el("div", {id: "conv"});
    const insp = el("div", {id: "insp"});
    const layout = el("div", {class: "layout closed", id: "layout"}, conv, insp);
    const jumpIn = el("input", {type: "number", id: "jump", placeholder: "seq", min: 1, class: "seq"});
    const jumpGo = el("button", {id: "jumpgo", onclick: () => jumpIn.value && openFrames(key, Number(jumpIn.value))}, "frames at seq");
    put($main, headBox, charts, el("h2", {}, "Conversation ", el("span", {class: "legend"}, "click an item to see its frames")),
      el("div", {class: "bar"}, jumpIn, jumpGo), layout, el("div", {id: "tip"}));
    let count = 0;
    const more = el("button", {id: "more"}, "more");
    const addItems = (items) => { for (const it of items) conv.insertBefore(renderItem(key, it), more.parentNode === conv ? more : null); count += items.length; };
    const pageMore = (total, further) => {
      if (count < total || further) {
        more.textContent = vis(further ? "show more" : `show more (${num(total - count)} left)`);
        more.onclick = async () => { const r = await api("items", {k: key, from: count}); addItems(r.items); pageMore(r.items_total, r.more); };
        conv.appendChild(more);
      } else if (more.parentNode) more.remove();
    };
    let first;
    try { first = await pItems; } catch (e) { return fail(e); }
    addItems(first.items);
    pageMore(first.items_total, first.more);
    let d;
    try { d = await pSession; } catch (e) { return fail(e); }
    const s = d.session;
    document.title = vis(s.name || s.session_id) + " · wire-ui";
    put($crumbs, STATIC && STATIC.only ? "" : el("a", {href: "#"}, "sessions"), " / ", s.name || s.session_id);
    const cards = el("div", {class: "cards", id: "cards"}, (CARDS[s.protocol] || CARDS.wire).filter(([k]) => d.counts[k] !== undefined).map(([k, label, f]) =>
      el("div", {class: "card", "data-k": k}, el("b", {}, (f || num)(d.counts[k] ?? 0) || "0"), el("span", {}, label))));
    if (d.counts.gaps) cards.appendChild(el("div", {class: "card bad"}, el("b", {}, num(d.counts.gaps)), el("span", {}, "recording gaps")));
    const cmd = Array.isArray(s.command) ? s.command.join(" ") : (s.command || "");
    put(headBox,
      el("h1", {id: "title"}, s.name || s.session_id, " ", proto(s.protocol), d.live ? el("span", {class: "live", id: "livebadge"}, " ● live") : null),
      el("div", {class: "muted mono"}, `${s.session_id} · ${s.started_at || "(live)"} · ${s.agent || ""} · ${(s.source_file || "").split("/").pop()}`),
      el("div", {class: "muted mono"}, cmd.length > 200 ? cmd.slice(0, 199) + "…" : cmd), el("div", {}, tagList(s.tags)),
      d.note ? el("div", {class: "bad"}, d.note) : null,
      d.frames_cut ? el("div", {class: "bad"}, `this file holds the first frames only: ${num(d.frames_cut)} later frames are left out of the inspector`) : null,
      cards);
    const parts = [];
    if (d.spans.length) {
      parts.push(el("h2", {}, "Timeline ", el("span", {class: "legend"}, "wheel: zoom · drag: pan · double-click: reset · click a bar: its frames")), el("canvas", {id: "tl"}));
    }
    if (d.tokens.length) parts.push(el("h2", {}, "Tokens per step ", el("span", {class: "legend"}, "input · cache read · cache write · output · subagents")), el("canvas", {id: "tok"}));
    put(charts, ...parts);
    if (d.spans.length) timeline(document.getElementById("tl"), d.spans, key);
    if (d.tokens.length) tokenChart(document.getElementById("tok"), d.tokens);
    if (jump) openFrames(key, jump);
    if (d.live) {
      const badge = document.getElementById("livebadge");
      const poll = async () => {
        let r;
        try { r = await api("items", {k: key, from: count}); } catch (e) { return; }
        if (r.items.length) addItems(r.items);
        const card = document.querySelector('.card[data-k="frames"] b');
        if (card) card.textContent = vis(num(r.frames));
        if (r.live) liveTimer = setTimeout(poll, 400);
        else if (badge) badge.textContent = vis(" (recording ended)");
      };
      liveTimer = setTimeout(poll, 400);
    }
  }

  function renderItem(key, it) {
    let node;
    const t = el("span", {class: "t"}, it.t === null || it.t === undefined ? "" : (it.t / 1000).toFixed(3) + "s");
    if (it.k === "think") {
      node = el("div", {class: "item text think"}, t, el("details", {}, el("summary", {}, "thinking (" + it.x.length + " chars)"), el("div", {}, it.x)));
    } else if (it.k === "text" || it.k === "user") {
      node = el("div", {class: "item text " + it.k}, t, el("span", {class: "who"}, it.k === "user" ? "user" : "assistant"), it.x);
    } else {
      const body = el("div", {class: "c"},
        (it.g || []).map(([text, style]) => el("span", {class: style ? style.split(/\s+/).filter((w) => /^[a-z]+$/.test(w)).map((w) => "s-" + w).join(" ") : null}, text)));
      // indented as in the terminal; a wrapped line keeps its indent (CSSOM: allowed by the CSP)
      body.style.paddingLeft = (Math.max(0, (it.i || 0) - 1) * 16) + "px";
      node = el("div", {class: "item line"}, t, body);
    }
    if (it.s !== null && it.s !== undefined) {
      node.dataset.seq = it.s;
      node.addEventListener("click", (ev) => {
        if (ev.target.tagName === "SUMMARY") return;
        document.querySelectorAll(".item.sel").forEach((n) => n.classList.remove("sel"));
        node.classList.add("sel");
        openRelated(key, it.s);
      });
    }
    return node;
  }

  // -- frame inspector -------------------------------------------------------------------------
  async function openRelated(key, seq) {
    let r;
    try { r = await api("related", {k: key, seq: seq}); } catch (e) { return fail(e); }
    showFrames(r.frames, `frames behind item at seq ${seq}`, key);
  }
  async function openFrames(key, seq) {
    let r;
    try { r = await api("frames", {k: key, seq: Math.max(1, seq - 5), n: 40}); } catch (e) { return fail(e); }
    showFrames(r.frames, `frames from seq ${Math.max(1, seq - 5)}`, key, seq);
  }
  function b64bytes(b64) {
    const s = atob(b64), a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a;
  }
  function hexdump(a) {
    const out = [];
    for (let i = 0; i < a.length && i < 65536; i += 16) {
      const row = Array.from(a.slice(i, i + 16));
      out.push(i.toString(16).padStart(6, "0") + "  " + row.map((b) => b.toString(16).padStart(2, "0")).join(" ").padEnd(48) + "  " +
        row.map((b) => b >= 32 && b < 127 ? String.fromCharCode(b) : ".").join(""));
    }
    if (a.length > 65536) out.push("… " + (a.length - 65536) + " more bytes");
    return out.join("\n");
  }
  function showFrames(frames, title, key, mark) {
    const layout = document.getElementById("layout"), insp = document.getElementById("insp");
    if (!insp) return;
    layout.classList.remove("closed");
    const list = frames.map((f) => {
      const bytes = f.raw_b64 ? b64bytes(f.raw_b64) : new Uint8Array();
      const text = new TextDecoder("utf-8", {fatal: false}).decode(bytes);
      let pretty = text;
      try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON: shown as it is */ }
      const pre = el("pre", {class: "body"}, pretty);
      const show = (what) => { pre.textContent = vis(what === "json" ? pretty : what === "raw" ? text : hexdump(bytes)); };
      const gap = f.direction === "proxy" && f.method === "recording_gap";
      const arrow = f.direction === "c2a" ? "client → agent" : f.direction === "a2c" ? "agent → client" : f.direction;
      return el("div", {class: "frame " + f.direction + (f.anomaly || f.parse_error || gap || (f.conformance || []).length ? " anom" : ""), "data-seq": f.seq},
        el("div", {class: "fh"}, el("b", {}, "#" + f.seq), el("span", {}, arrow), el("span", {}, [f.kind, f.method, f.msg_type].filter(Boolean).join(" ")),
          f.rpc_id !== null && f.rpc_id !== undefined ? el("span", {class: "muted"}, "id " + f.rpc_id) : null,
          el("span", {class: "muted"}, f.ts || ""), el("span", {class: "muted"}, f.gap_ms === null ? "" : "+" + fmtMs(f.gap_ms)),
          el("span", {class: "muted"}, num(f.byte_len) + " B"),
          f.anomaly ? el("span", {class: "bad"}, "anomaly: " + f.anomaly) : null,
          f.parse_error ? el("span", {class: "bad"}, "parse error: " + f.parse_error) : null,
          gap ? el("span", {class: "bad"}, "recording gap") : null,
          f.known === false ? el("span", {class: "bad"}, "not in the protocol") : null,
          (f.conformance || []).map((c) => el("span", {class: "bad conf"}, c))),
        el("div", {class: "tabs"}, el("a", {onclick: () => show("json")}, "pretty JSON"), el("a", {onclick: () => show("raw")}, "exact text"), el("a", {onclick: () => show("hex")}, "bytes (hex)")),
        pre);
    });
    put(insp, el("div", {class: "bar"}, el("b", {}, title), el("a", {onclick: () => layout.classList.add("closed")}, "close")),
      ...(list.length ? list : [el("p", {class: "muted"}, "no frames")]));
    if (mark) { const m = insp.querySelector(`.frame[data-seq="${mark}"]`); if (m) { m.scrollIntoView({block: "start"}); m.classList.add("target"); } }
    else insp.scrollTop = 0;
  }

  // -- timeline: lanes of bars, zoom and pan ---------------------------------------------------
  const KIND_COLOR = {turn: "#94a3b8", step: "#60a5fa", tool: "#34d399", request: "#f59e0b", rpc: "#a78bfa"};
  function timeline(cv, spans, key) {
    const lanes = [];
    const order = ["turns", "steps", "tools", "client"];
    for (const l of order) if (spans.some((s) => s.lane === l)) lanes.push(l);
    for (const s of spans) if (!lanes.includes(s.lane)) lanes.push(s.lane);
    const LH = 18, TOP = 18, LEFT = 150;
    cv.style.height = (TOP + lanes.length * LH + 6) + "px";
    const end = Math.max(1, ...spans.map((s) => s.end_ms ?? s.start_ms));
    let v0 = 0, v1 = end * 1.02;
    const tip = document.getElementById("tip");
    const laneOf = new Map(lanes.map((l, i) => [l, i]));
    function draw() {
      const dpr = window.devicePixelRatio || 1, W = cv.clientWidth, H = cv.clientHeight;
      cv.width = W * dpr; cv.height = H * dpr;
      const g = cv.getContext("2d"); g.scale(dpr, dpr); g.clearRect(0, 0, W, H);
      g.font = "11px system-ui, sans-serif"; g.fillStyle = "#6b7280";
      const x = (t) => LEFT + (t - v0) / (v1 - v0) * (W - LEFT - 8);
      const step = niceStep((v1 - v0) / 8);
      for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
        g.fillStyle = "#e5e7eb"; g.fillRect(x(t), TOP - 4, 1, H); g.fillStyle = "#6b7280"; g.fillText(fmtMs(t), x(t) + 2, 11);
      }
      lanes.forEach((l, i) => { g.fillStyle = "#374151"; g.fillText(l.length > 24 ? l.slice(0, 23) + "…" : l, 4, TOP + i * LH + 12); });
      for (const s of spans) {
        const a = x(s.start_ms), b = x(s.end_ms ?? s.start_ms);
        if (b < LEFT || a > W) continue;
        const bad = /error|fail|cancel|interrupt|reject|unanswered/.test(s.status || "");
        g.fillStyle = bad ? "#ef4444" : KIND_COLOR[s.kind] || "#9ca3af";
        g.fillRect(Math.max(LEFT, a), TOP + laneOf.get(s.lane) * LH + 2, Math.max(2, b - Math.max(LEFT, a)), LH - 5);
      }
    }
    function hit(ev) {
      const r = cv.getBoundingClientRect(), W = cv.clientWidth;
      const lane = Math.floor((ev.clientY - r.top - TOP) / LH), px = ev.clientX - r.left;
      const t = v0 + (px - LEFT) / (W - LEFT - 8) * (v1 - v0), slack = 3 * (v1 - v0) / (W - LEFT);
      return spans.find((s) => laneOf.get(s.lane) === lane && s.start_ms - slack <= t && (s.end_ms ?? s.start_ms) + slack >= t);
    }
    let drag = null;
    cv.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const r = cv.getBoundingClientRect(), W = cv.clientWidth;
      const t = v0 + (ev.clientX - r.left - LEFT) / (W - LEFT - 8) * (v1 - v0), f = ev.deltaY > 0 ? 1.25 : 0.8;
      v0 = t - (t - v0) * f; v1 = t + (v1 - t) * f;
      if (v1 - v0 < 0.01) v1 = v0 + 0.01;
      draw();
    }, {passive: false});
    cv.addEventListener("mousedown", (ev) => { drag = {x: ev.clientX, v0, v1, moved: false}; });
    window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
    cv.addEventListener("mousemove", (ev) => {
      if (drag && (ev.buttons & 1)) {
        const dt = (ev.clientX - drag.x) / (cv.clientWidth - LEFT - 8) * (drag.v1 - drag.v0);
        if (Math.abs(ev.clientX - drag.x) > 2) drag.moved = true;
        v0 = drag.v0 - dt; v1 = drag.v1 - dt; draw(); return;
      }
      const s = hit(ev);
      if (s) {
        tip.style.display = "block"; tip.style.left = (ev.clientX + 12) + "px"; tip.style.top = (ev.clientY + 12) + "px";
        tip.textContent = vis(`${s.label} · ${fmtMs(s.start_ms)} → ${s.end_ms === null ? "no end" : fmtMs(s.end_ms - s.start_ms)} · ${s.status || ""} · seq ${s.seq}`);
      } else tip.style.display = "none";
    });
    cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    cv.addEventListener("click", (ev) => {
      if (drag && drag.moved) return;
      const s = hit(ev);
      if (!s) return;
      const item = [...document.querySelectorAll(".item[data-seq]")].find((n) => Number(n.dataset.seq) >= s.seq);
      if (item) { item.scrollIntoView({block: "center"}); document.querySelectorAll(".item.sel").forEach((n) => n.classList.remove("sel")); item.classList.add("sel"); }
      openRelated(key, s.seq);
    });
    cv.addEventListener("dblclick", () => { v0 = 0; v1 = end * 1.02; draw(); });
    window.addEventListener("resize", draw);
    draw();
  }
  function niceStep(x) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(x, 1e-6)))), m = x / p;
    return (m < 2 ? 2 : m < 5 ? 5 : 10) * p;
  }
  function tokenChart(cv, rows) {
    const keys = [["input_other", "#4e79a7"], ["input_cache_read", "#59a14f"], ["input_cache_creation", "#edc948"], ["output", "#e15759"], ["subagents", "#b07aa1"]];
    const dpr = window.devicePixelRatio || 1, W = cv.clientWidth, H = cv.clientHeight;
    cv.width = W * dpr; cv.height = H * dpr;
    const g = cv.getContext("2d"); g.scale(dpr, dpr);
    const tot = rows.map((r) => keys.reduce((a, [k]) => a + (r[k] || 0), 0)), max = Math.max(1, ...tot);
    const bw = Math.max(1, (W - 60) / rows.length);
    g.font = "11px system-ui, sans-serif"; g.fillStyle = "#6b7280"; g.fillText(num(max), 2, 11);
    rows.forEach((r, i) => {
      let y = H - 4;
      for (const [k, c] of keys) {
        const h = (r[k] || 0) / max * (H - 18);
        g.fillStyle = c; g.fillRect(56 + i * bw, y - h, Math.max(1, bw - 1), h); y -= h;
      }
    });
  }

  // -- replay report ---------------------------------------------------------------------------
  async function showReport(n) {
    let r;
    try { r = await api("report", {n: n}); } catch (e) { return fail(e); }
    put($crumbs, el("a", {href: "#"}, "sessions"), " / replay report " + r.name);
    const pretty = (v) => v === undefined || v === null ? "(nothing)" : typeof v === "string" ? v : JSON.stringify(v, null, 2);
    const divs = r.divergences.map((d, i) => el("div", {class: "div" + (i === 0 ? " first" : ""), id: "div" + i},
      el("div", {}, el("b", {}, i === 0 ? "first divergence" : "divergence " + (i + 1)), " · ", el("span", {class: "tag"}, d.kind), " ", d.where || ""),
      el("div", {class: "mono"}, d.message || ""),
      (d.details || []).length ? el("pre", {class: "mono"}, d.details.join("\n")) : null,
      el("div", {class: "sbs"},
        el("div", {class: "recorded"}, el("b", {}, "recorded"),
          d.recorded_seq && r.key ? el("a", {class: "recseq", href: "#s/" + encodeURIComponent(r.key) + "/f/" + d.recorded_seq}, ` frame #${d.recorded_seq} in the recording`) : null,
          el("pre", {}, pretty(d.expected))),
        el("div", {class: "live-side"}, el("b", {}, "live"), el("pre", {}, pretty(d.got))))));
    put($main, 
      el("h1", {}, "replay of ", r.session_name || r.session_id || "?", " ", el("span", {class: r.ok ? "" : "bad"}, r.ok ? "ok" : "diverged")),
      el("div", {class: "muted mono"}, (r.mode || "") + " · " + (r.recording || "") + (r.stopped ? " · stopped: " + r.stopped : "")),
      r.key ? el("p", {}, el("a", {href: "#s/" + encodeURIComponent(r.key)}, "open the recorded session")) : null,
      ...(divs.length ? divs : [el("p", {}, "no divergences")]));
  }

  route();
})();
