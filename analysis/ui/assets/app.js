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
    if (h.startsWith("cmp/")) { const [a, b] = h.slice(4).split("/"); return showCompare(a, b); }
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
      put(table, rows.length > SHOWN ? el("caption", {class: "muted"}, `the first ${num(SHOWN)} of ${num(rows.length)} in this order: sort to see others`) : null,
        el("thead", {}, head), el("tbody", {}, rows));
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
    forkInfo = null;
    if (!STATIC && !first.live && !key.startsWith("live.")) forkOffers(key, conv);
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
      STATIC || d.live ? null : el("div", {}, el("button", {id: "cmpwith", onclick: () => pickCompare(key, s)}, "compare with…"),
        // a fork's branch (wire-replay --fork-at, or this page's fork): its parent, by id
        s.tags && typeof s.tags.fork_of === "string" ? el("a", {id: "cmpparent", href: "#cmp/" + encodeURIComponent(s.tags.fork_of) + "/" + encodeURIComponent(key)},
          " compare with the parent " + s.tags.fork_of) : null, el("div", {id: "cmppick"})),
      d.frames_cut ? el("div", {class: "bad"}, `this file holds the first frames only: ${num(d.frames_cut)} later frames are left out of the inspector`) : null,
      cards);
    const parts = [];
    const startup = d.spans.length ? startupOf(d.spans) : null;
    let tl = null;
    if (d.spans.length) {
      parts.push(el("h2", {}, "Timeline ", el("span", {class: "legend"}, "wheel: zoom · drag: pan · double-click: reset · click a bar: its frames"),
        startup ? el("span", {class: "startup"}, " · ", el("span", {id: "startup"}, "start-up " + fmtMs(startup.end)),
          " of " + fmtMs(startup.total) + " left of the view: ", el("a", {id: "tlall", onclick: () => tl && tl.all()}, "show all"),
          " · ", el("a", {id: "tlhome", onclick: () => tl && tl.home()}, "zoom to the turns")) : null), el("canvas", {id: "tl"}));
    }
    if (d.tokens.length) parts.push(el("h2", {}, "Tokens per step ", tokenLegend()), el("canvas", {id: "tok"}));
    const tables = spanTables(key, d.spans);
    put(charts, ...parts, ...tables);
    if (d.spans.length) tl = timeline(document.getElementById("tl"), d.spans, key, startup);
    if (d.tokens.length) tokenChart(document.getElementById("tok"), d.tokens);
    if (jump) openFrames(key, jump);
    if (!STATIC && !d.live) modelCalls(key, charts);
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
      markFork(key, node);
    }
    return node;
  }

  // -- answer differently and continue: a fork run by wire-ui (its --agent command) ------------
  let forkInfo = null;  // the session's agent requests a fork can change, by their items' seq
  async function apiPost(name, body) {
    const r = await fetch("/api/" + name, {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    const d = await r.json().catch(() => ({error: r.statusText}));
    if (!r.ok) throw new Error(d.error || r.statusText);
    return d;
  }
  async function forkOffers(key, conv) {
    let d;
    try { d = await api("forkable", {k: key}); } catch (e) { return; }
    const bySeq = new Map();
    for (const r of d.requests) { bySeq.set(r.seq, r); if (!bySeq.has(r.answer_seq)) bySeq.set(r.answer_seq, r); }
    forkInfo = {key, bySeq, d};
    conv.querySelectorAll(".item[data-seq]").forEach((n) => markFork(key, n));
  }
  function markFork(key, node) {
    if (!forkInfo || forkInfo.key !== key || node.querySelector(".forkbtn")) return;
    const r = forkInfo.bySeq.get(Number(node.dataset.seq));
    // one offer per request, on its first item (the request's, else its answer's)
    if (!r || document.querySelector(`.forkbtn[data-n="${r.n}"]`)) return;
    node.appendChild(el("button", {class: "forkbtn", "data-n": r.n, "data-label": r.label,
      title: "replay the session up to this request with the model pinned, answer it differently, and go on live",
      onclick: (ev) => { ev.stopPropagation(); forkForm(key, r, node); }}, "answer differently and continue"));
  }
  // the answer's text and yes/no leaves (ids are the replay's to re-address, lists are left)
  function leaves(obj, path, out) {
    for (const [k, v] of Object.entries(obj)) {
      if (/(^|_)id$|Id$|ID$/.test(k)) continue;
      const p = path.concat([k]);
      if (typeof v === "string" || typeof v === "boolean") out.push([p, v]);
      else if (v && typeof v === "object" && !Array.isArray(v)) leaves(v, p, out);
    }
    return out;
  }
  function forkForm(key, r, node) {
    const old = document.getElementById("forkform");
    if (old) old.remove();
    const info = forkInfo.d, fields = [];
    const rows = leaves(r.result, [], []).map(([p, v]) => {
      const choices = p.length === 1 ? r.choices[p[0]] : null;
      let input;
      if (choices) {
        input = el("select", {}, choices.map((c) => el("option", {value: c}, c)));
        input.value = v;
      } else if (typeof v === "boolean") {
        input = el("input", {type: "checkbox"});
        input.checked = v;
      } else {
        input = el(v.length > 60 || v.includes("\n") ? "textarea" : "input", {rows: 4, cols: 70, size: 50});
        input.value = v;
      }
      input.dataset.path = JSON.stringify(p);
      fields.push([p, input]);
      return el("label", {class: "forkfield"}, el("span", {class: "muted"}, p.join(" › ")), input);
    });
    const status = el("div", {id: "forkstatus", class: "muted"});
    const go = el("button", {id: "forkgo", disabled: info.agent ? null : "disabled"}, "fork and continue");
    go.addEventListener("click", async () => {
      const result = JSON.parse(JSON.stringify(r.result));
      for (const [p, input] of fields) {
        let o = result;
        for (const k of p.slice(0, -1)) o = o[k];
        o[p[p.length - 1]] = input.type === "checkbox" ? input.checked : input.value;
      }
      const change = {};
      for (const k of Object.keys(result)) if (JSON.stringify(result[k]) !== JSON.stringify(r.result[k])) change[k] = result[k];
      if (!Object.keys(change).length) { status.className = "bad"; status.textContent = vis("change the answer first"); return; }
      go.disabled = true;
      status.className = "muted";
      status.textContent = vis("starting the fork…");
      let job;
      try { job = await apiPost("fork", {k: key, n: r.n, answer: change}); } catch (e) {
        go.disabled = false; status.className = "bad"; status.textContent = vis(String(e.message || e)); return;
      }
      followFork(job, status, go, location.hash);
    });
    const form = el("div", {id: "forkform", class: "forkform"},
      el("b", {}, `answer ${r.label} (agent request ${r.n}) differently and continue`),
      el("div", {class: "muted"}, "the fork replays this session up to here with the model pinned, gives the changed answer, " +
        "then goes on live" + (info.agent ? " with: " + info.agent + "; its branch is stored in " + info.store +
        " (the recording is not written) and opens when it is done" : "")),
      info.agent ? null : el("p", {class: "bad", id: "forkhow"}, info.how),
      el("details", {}, el("summary", {}, "the recorded answer"), el("pre", {class: "body"}, JSON.stringify(r.result, null, 2))),
      rows, el("div", {}, go, " ", el("button", {onclick: () => form.remove()}, "cancel")), status);
    node.after(form);
  }
  async function followFork(job, status, go, here) {
    let j = job;
    for (;;) {
      if (j.state === "done") {
        status.textContent = vis(j.summary);
        if (location.hash === here && j.branch && j.branch.key) location.hash = "#s/" + encodeURIComponent(j.branch.key);
        return;
      }
      if (j.state === "failed") { status.className = "bad"; status.textContent = vis(j.error); go.disabled = false; return; }
      status.textContent = vis(`the fork is running (${Math.round(j.seconds)} s)` + (j.progress.length ? ": " + j.progress[0] : "…"));
      await new Promise((ok) => setTimeout(ok, 1000));
      try { j = await api("fork", {job: job.job}); } catch (e) { status.className = "bad"; status.textContent = vis(String(e.message || e)); return; }
    }
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
  const KIND_COLOR = {turn: "#94a3b8", step: "#60a5fa", tool: "#34d399", request: "#f59e0b", rpc: "#a78bfa", startup: "#e5e7eb"};
  const ACTIVE = new Set(["turn", "step", "tool", "request"]);
  // The time before the first turn, tool call or request (the agent starting up) when it is most
  // of the session: one labelled span, and the view opens on what came after it.
  function startupOf(spans) {
    const end = Math.max(1, ...spans.map((s) => s.end_ms ?? s.start_ms));
    const act = spans.filter((s) => ACTIVE.has(s.kind)).map((s) => s.start_ms);
    if (!act.length) return null;
    const a0 = Math.min(...act);
    return a0 > 0.3 * end && a0 > 500 ? {end: a0, total: end} : null;
  }
  function timeline(cv, spans0, key, startup) {
    const spans = spans0.slice();
    if (startup) spans.unshift({kind: "startup", lane: "start-up", label: "start-up " + fmtMs(startup.end), start_ms: 0, end_ms: startup.end, status: "", seq: null});
    const lanes = [];
    const order = ["start-up", "turns", "steps", "tools", "client"];
    for (const l of order) if (spans.some((s) => s.lane === l)) lanes.push(l);
    for (const s of spans) if (!lanes.includes(s.lane)) lanes.push(s.lane);
    const LH = 18, TOP = 18, LEFT = 170;
    cv.style.height = (TOP + lanes.length * LH + 6) + "px";
    cv.dataset.lanes = JSON.stringify(lanes);
    const end = Math.max(1, ...spans.map((s) => s.end_ms ?? s.start_ms));
    // zoomed to the activity: the start-up keeps an eighth of the width, enough for its label
    const home = () => startup ? [startup.end - (end - startup.end) / 7, end + (end - startup.end) * 0.02] : [0, end * 1.02];
    let [v0, v1] = home();
    const tip = document.getElementById("tip");
    const laneOf = new Map(lanes.map((l, i) => [l, i]));
    function draw() {
      const dpr = window.devicePixelRatio || 1, W = cv.clientWidth, H = cv.clientHeight;
      cv.width = W * dpr; cv.height = H * dpr;
      const g = cv.getContext("2d"); g.scale(dpr, dpr); g.clearRect(0, 0, W, H);
      g.font = "11px system-ui, sans-serif"; g.fillStyle = "#6b7280";
      const x = (t) => LEFT + (t - v0) / (v1 - v0) * (W - LEFT - 8);
      const step = niceStep((v1 - v0) / 8), ticks = [];
      for (let i = Math.ceil(v0 / step); i * step <= v1; i++) {
        const t = i * step, label = fmtTick(t, step);
        if (x(t) < LEFT) continue;
        ticks.push(label);
        g.fillStyle = "#e5e7eb"; g.fillRect(x(t), TOP - 4, 1, H); g.fillStyle = "#6b7280"; g.fillText(label, x(t) + 2, 11);
      }
      cv.dataset.ticks = JSON.stringify(ticks);
      cv.dataset.view = JSON.stringify([v0, v1]);
      lanes.forEach((l, i) => { g.fillStyle = "#374151"; g.fillText(l.length > 28 ? l.slice(0, 27) + "…" : l, 4, TOP + i * LH + 12); });
      for (const s of spans) {
        const a = x(s.start_ms), b = x(s.end_ms ?? s.start_ms);
        if (b < LEFT || a > W) continue;
        const bad = /error|fail|cancel|interrupt|reject|unanswered/.test(s.status || "");
        const x0 = Math.max(LEFT, a), w = Math.max(2, Math.min(b, W) - x0), y = TOP + laneOf.get(s.lane) * LH + 2;
        g.fillStyle = bad ? "#ef4444" : KIND_COLOR[s.kind] || "#9ca3af";
        g.fillRect(x0, y, w, LH - 5);
        // its duration written on the bar when it fits (the start-up: its label)
        const text = s.kind === "startup" ? s.label + (a < LEFT ? " ◂" : "") : s.end_ms === null ? "" : fmtMs(s.end_ms - s.start_ms);
        if (text && g.measureText(text).width + 6 < w) { g.fillStyle = "#111827"; g.fillText(text, x0 + 3, y + 10); }
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
        tip.textContent = vis(s.kind === "startup" ? s.label + " · before the first turn" :
          `${s.label} · ${fmtMs(s.start_ms)} → ${s.end_ms === null ? "no end" : fmtMs(s.end_ms - s.start_ms)} · ${s.status || ""} · seq ${s.seq}`);
      } else tip.style.display = "none";
    });
    cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    cv.addEventListener("click", (ev) => {
      if (drag && drag.moved) return;
      const s = hit(ev);
      if (!s) return;
      if (s.kind === "startup") { v0 = 0; v1 = end * 1.02; return draw(); }
      const item = [...document.querySelectorAll(".item[data-seq]")].find((n) => Number(n.dataset.seq) >= s.seq);
      if (item) { item.scrollIntoView({block: "center"}); document.querySelectorAll(".item.sel").forEach((n) => n.classList.remove("sel")); item.classList.add("sel"); }
      openRelated(key, s.seq);
    });
    cv.addEventListener("dblclick", () => { [v0, v1] = home(); draw(); });
    window.addEventListener("resize", draw);
    draw();
    return {all: () => { v0 = 0; v1 = end * 1.02; draw(); }, home: () => { [v0, v1] = home(); draw(); }};
  }
  // an axis label as fine as the tick step: zoomed in, "1 min 3.2 s" and "1 min 3.4 s", not "1 min 3 s" twice
  function fmtTick(t, step) {
    const dec = (x) => Math.min(6, Math.max(0, Math.ceil(-Math.log10(x) - 1e-9)));
    if (t < 1000 && step < 1000) return t.toFixed(dec(step)) + " ms";
    const d = dec(step / 1000);
    if (t < 60000) return (t / 1000).toFixed(d) + " s";
    const m = Math.floor(t / 60000 + 1e-9), sec = t / 1000 - m * 60;
    return m + " min " + Math.max(0, sec).toFixed(d) + " s";
  }
  function niceStep(x) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(x, 1e-6)))), m = x / p;
    return (m < 2 ? 2 : m < 5 ? 5 : 10) * p;
  }
  const TOKEN_KEYS = [["input_other", "#4e79a7", "input"], ["input_cache_read", "#59a14f", "cache read"],
    ["input_cache_creation", "#edc948", "cache write"], ["output", "#e15759", "output"], ["subagents", "#b07aa1", "subagents"]];
  function tokenLegend() {
    // the colour key: a swatch (its colour through the CSSOM, allowed by the CSP) and a name
    return el("span", {class: "legend", id: "toklegend"}, TOKEN_KEYS.map(([k, c, label]) => {
      const sw = el("i", {class: "swatch", "data-k": k});
      sw.style.background = c;
      return el("span", {class: "key"}, sw, label);
    }));
  }
  function tokenChart(cv, rows) {
    const dpr = window.devicePixelRatio || 1, W = cv.clientWidth, H = cv.clientHeight;
    cv.width = W * dpr; cv.height = H * dpr;
    const g = cv.getContext("2d"); g.scale(dpr, dpr);
    const tot = rows.map((r) => TOKEN_KEYS.reduce((a, [k]) => a + (r[k] || 0), 0)), max = Math.max(1, ...tot);
    const L = 56, B = 16, bw = Math.max(1, (W - L - 4) / rows.length);
    const name = (r) => r.turn === null || r.turn === undefined ? "—" : r.step === null || r.step === undefined ? `t${r.turn}` : `t${r.turn}·s${r.step}`;
    g.font = "11px system-ui, sans-serif"; g.fillStyle = "#6b7280"; g.fillText(num(max), 2, 11); g.fillText("0", 2, H - B);
    // a label under every bar that has room for one, else under every n-th
    const every = Math.max(1, Math.ceil(40 / bw));
    rows.forEach((r, i) => {
      let y = H - B;
      for (const [k, c] of TOKEN_KEYS) {
        const h = (r[k] || 0) / max * (H - B - 14);
        g.fillStyle = c; g.fillRect(L + i * bw, y - h, Math.max(1, bw - 1), h); y -= h;
      }
      if (i % every === 0) { g.fillStyle = "#6b7280"; g.fillText(name(r), L + i * bw + 1, H - 3); }
    });
    cv.dataset.steps = JSON.stringify(rows.map(name));
    const tip = document.getElementById("tip");
    cv.onmousemove = (ev) => {
      const i = Math.floor((ev.clientX - cv.getBoundingClientRect().left - L) / bw), r = rows[i];
      if (!r) { tip.style.display = "none"; return; }
      tip.style.display = "block"; tip.style.left = (ev.clientX + 12) + "px"; tip.style.top = (ev.clientY + 12) + "px";
      tip.textContent = vis(`turn ${r.turn ?? "?"} step ${r.step ?? "?"} · ` + TOKEN_KEYS.filter(([k]) => r[k]).map(([k, , label]) => `${label} ${num(r[k])}`).join(" · ") + ` · total ${num(tot[i])}`);
    };
    cv.onmouseleave = () => { tip.style.display = "none"; };
  }

  // -- tables of tool calls and requests: sortable by any column --------------------------------
  const SHOWN = 500;  // rows of a table in the DOM (a session can have 100,000 requests)
  function sortable(id, cols, rows, key) {
    // cols: [name, label, value(row), shown(row), numeric]
    const table = el("table", {class: "idx spans", id: id});
    let by = null, desc = false;
    function draw() {
      const order = rows.slice();
      if (by !== null) {
        const f = cols[by][2];
        order.sort((a, b) => { const x = f(a), y = f(b);
          return (x === y ? 0 : x === null || x === undefined ? 1 : y === null || y === undefined ? -1 : x > y ? 1 : -1) * (desc ? -1 : 1); });
      }
      put(table, rows.length > SHOWN ? el("caption", {class: "muted"}, `the first ${num(SHOWN)} of ${num(rows.length)} in this order: sort to see others`) : null,
        el("thead", {}, el("tr", {}, cols.map(([name, label], i) => el("th", {"data-col": name, onclick: () => {
        if (by === i) desc = !desc; else { by = i; desc = !!cols[i][4]; }
        draw(); }}, label + (by === i ? (desc ? " ▾" : " ▴") : ""))))),
      el("tbody", {}, order.slice(0, SHOWN).map((r) => el("tr", {class: "row", "data-seq": r.seq, "data-ms": r.end_ms === null ? "" : r.end_ms - r.start_ms,
        onclick: () => openRelated(key, r.seq)}, cols.map(([name, , , shown, numeric]) => el("td", {class: numeric ? "n" : null, "data-col": name}, shown(r)))))));
    }
    draw();
    return table;
  }
  function spanTables(key, spans) {
    const dur = (s) => s.end_ms === null || s.end_ms === undefined ? null : s.end_ms - s.start_ms;
    const cols = (what) => [["seq", "seq", (s) => s.seq, (s) => String(s.seq), true],
      ["label", what, (s) => s.label, (s) => s.label],
      ["start", "at", (s) => s.start_ms, (s) => fmtMs(s.start_ms), true],
      ["duration", what === "request" ? "wait / time to answer" : "duration", dur, (s) => dur(s) === null ? "no end" : fmtMs(dur(s)), true],
      ["status", "status", (s) => s.status || "", (s) => s.status || ""]];
    const out = [];
    const tools = spans.filter((s) => s.kind === "tool"), reqs = spans.filter((s) => s.kind === "request" || s.kind === "rpc");
    // a tool call's wait: the requests to the client (approvals, questions) asked while it ran
    const asked = spans.filter((s) => s.kind === "request" && s.end_ms !== null && s.end_ms !== undefined);
    const waited = (t) => asked.filter((q) => q.start_ms >= t.start_ms && (t.end_ms === null || t.end_ms === undefined || q.start_ms <= t.end_ms))
      .reduce((a, q) => a + (q.end_ms - q.start_ms), 0);
    const toolCols = cols("tool call");
    toolCols.splice(4, 0, ["waited", "client wait", waited, (s) => waited(s) ? fmtMs(waited(s)) : "", true]);
    if (tools.length) out.push(el("h2", {}, "Tool calls ", el("span", {class: "legend"}, `${tools.length} · click a column to sort`)), sortable("tooltable", toolCols, tools, key));
    if (reqs.length) out.push(el("h2", {}, "Requests ", el("span", {class: "legend"}, `${reqs.length} · requests to the client (their wait) and every JSON-RPC request (time to its answer)`)),
      sortable("reqtable", cols("request").concat([["lane", "lane", (s) => s.lane, (s) => s.lane]]), reqs, key));
    return out.map((n) => n.tagName === "TABLE" ? el("div", {class: "tablebox"}, n) : n);
  }

  // -- replay report ---------------------------------------------------------------------------
  // The lines of one side that the other side lacks (a longest common subsequence of lines),
  // each its own block with class "chg"; big documents are compared line by line instead.
  function changedLines(a, b) {
    const n = a.length, m = b.length, ca = new Array(n).fill(true), cb = new Array(m).fill(true);
    if (n * m > 4e6) {
      for (let i = 0; i < Math.max(n, m); i++) if (a[i] === b[i]) { ca[i] = false; cb[i] = false; }
      return [ca, cb];
    }
    const L = Array.from({length: n + 1}, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    for (let i = 0, j = 0; i < n && j < m;) {
      if (a[i] === b[j]) { ca[i] = false; cb[j] = false; i++; j++; } else if (L[i + 1][j] >= L[i][j + 1]) i++; else j++;
    }
    return [ca, cb];
  }
  function marked(left, right, side) {
    const a = left.split("\n"), b = right.split("\n"), ch = changedLines(a, b)[side], lines = side ? b : a;
    return el("pre", {}, lines.flatMap((line, i) => [ch[i] ? el("span", {class: "chg"}, line) : line, "\n"]));
  }
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
          marked(pretty(d.expected), pretty(d.got), 0)),
        el("div", {class: "live-side"}, el("b", {}, "live"), marked(pretty(d.expected), pretty(d.got), 1)))));
    put($main, 
      el("h1", {}, "replay of ", r.session_name || r.session_id || "?", " ", el("span", {class: r.ok ? "" : "bad"}, r.ok ? "ok" : "diverged")),
      el("div", {class: "muted mono"}, (r.mode || "") + " · " + (r.recording || "") + (r.stopped ? " · stopped: " + r.stopped : "")),
      r.key ? el("p", {}, el("a", {href: "#s/" + encodeURIComponent(r.key)}, "open the recorded session")) : null,
      ...(divs.length ? divs : [el("p", {}, "no divergences")]));
  }

  // -- compare two sessions (wire-diff's alignment and changes) -------------------------------
  async function pickCompare(key, s) {
    const box = document.getElementById("cmppick");
    let r;
    try { r = await api("index", {limit: 100}); } catch (e) { return fail(e); }
    const others = r.rows.filter((x) => x.key !== key && !String(x.key).startsWith("live."))
      .sort((x, y) => (x.protocol === s.protocol ? 0 : 1) - (y.protocol === s.protocol ? 0 : 1));
    put(box, others.length ? el("ul", {class: "cmplist"}, others.map((x) => el("li", {},
      el("a", {class: "cmpto", "data-key": x.key, href: "#cmp/" + encodeURIComponent(key) + "/" + encodeURIComponent(x.key)},
        x.name || x.session_id), " ", proto(x.protocol), " ", el("span", {class: "muted"}, (x.started_at || "") + " · " + (x.source_file || "").split("/").pop())))) :
      el("p", {class: "muted"}, "no other session to compare with"));
  }
  const short = (v, n) => { const t = v === null || v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v); return t.length > n ? t.slice(0, n - 1) + "…" : t; };
  const TIMES = ["duration_ms", "wait_ms"];
  function cmpSide(row, side) {
    const v = row[side];
    if (v === null || v === undefined) return el("td", {class: "cmpside none", "data-side": side}, row.mark === (side === "a" ? "extra" : "missing") ? "(not in this session)" : "");
    const lines = Object.entries(v).filter(([k, x]) => k !== "tokens" && !TIMES.includes(k) && x !== null && x !== undefined && x !== "")
      .map(([k, x]) => el("div", {class: "cell" + (row.changed.includes(k) ? " chg" : ""), "data-field": k}, el("span", {class: "fk"}, k.replace(/_/g, " ") + ": "), short(x, 600)));
    return el("td", {class: "cmpside", "data-side": side}, lines);
  }
  function cmpNum(row, side, what) {
    const v = row[side];
    if (!v) return el("td", {class: "n"}, "");
    const chg = what === "time" ? row.changed.some((f) => TIMES.includes(f)) : row.changed.includes("tokens");
    const text = what === "time" ? fmtMs(TIMES.map((k) => v[k]).find((x) => x !== null && x !== undefined)) : v.tokens ? num(v.tokens.total) : "";
    const tip = what === "tokens" && v.tokens ? `in ${num(v.tokens.input_other)} · out ${num(v.tokens.output)} · cache read ${num(v.tokens.input_cache_read)} · cache write ${num(v.tokens.input_cache_creation)}` : null;
    return el("td", {class: "n" + (chg ? " chg" : ""), "data-col": what + "-" + side, title: tip}, text);
  }
  async function showCompare(ka, kb) {
    put($main, el("p", {class: "muted"}, "comparing…"));
    let r;
    try { r = await api("compare", {a: ka, b: kb}); } catch (e) { return fail(e); }
    const label = (x) => (x.name || x.session_id) + " · " + (x.path || "").split("/").pop();
    put($crumbs, el("a", {href: "#"}, "sessions"), " / compare");
    document.title = "compare · wire-ui";
    const head = el("tr", {}, ["where", "A", "B", "time A", "time B", "tokens A", "tokens B"].map((h) => el("th", {}, h)));
    const body = r.rows.map((row, i) => el("tr", {class: "cmprow " + row.kind.replace(" ", "-") + (row.changed.length ? " changed" : "") + (row.mark ? " " + row.mark : ""),
      "data-i": i, "data-where": row.where, "data-changed": row.changed.join(" ")},
      el("td", {class: "where"}, row.where, row.what.length ? el("div", {class: "what"}, row.what.join(", ")) : null),
      cmpSide(row, "a"), cmpSide(row, "b"), cmpNum(row, "a", "time"), cmpNum(row, "b", "time"), cmpNum(row, "a", "tokens"), cmpNum(row, "b", "tokens")));
    const ta = r.tokens.a, tb = r.tokens.b;
    put($main,
      el("h1", {id: "cmptitle"}, "compare ", el("span", {class: r.same ? "" : "bad", id: "cmpverdict"}, r.same ? "same" : `${r.count} difference${r.count === 1 ? "" : "s"}`)),
      el("div", {class: "mono"}, "A: ", el("a", {href: "#s/" + encodeURIComponent(ka)}, label(r.a))),
      el("div", {class: "mono"}, "B: ", el("a", {href: "#s/" + encodeURIComponent(kb)}, label(r.b))),
      el("div", {class: "muted"}, `tokens A ${num(ta.total)} · B ${num(tb.total)} · ` +
        "compared as wire-diff compares them (ids, paths and times masked; timings are shown, not compared)"),
      ...r.notes.map((n) => el("div", {class: "muted"}, n)),
      r.rows_total > r.rows.length ? el("div", {class: "bad", id: "cmpcut"}, `${num(r.rows_total)} rows: the first ones and every changed one are drawn (${num(r.rows.length)})`) : null,
      ...r.session_changes.map((c) => el("div", {class: "bad"}, `${c.where}: ${c.what} ${c.field}: ${short(c.a, 80)} → ${short(c.b, 80)}`)),
      el("table", {class: "idx cmp", id: "cmptable"}, el("thead", {}, head), el("tbody", {}, body)));
  }

  // -- the model leg (wire-proxy --llm): each call's request, streamed answer, prompt diff ----
  async function modelCalls(key, box) {
    let r;
    try { r = await api("llm", {k: key}); } catch (e) { return; }
    if (!r.calls.length) return;
    const detail = el("div", {id: "llmcall"});
    const rows = r.calls.map((c) => el("tr", {class: "llmrow", "data-call": c.call, onclick: () => openCall(key, c.call, detail)},
      el("td", {class: "n"}, String(c.call)), el("td", {}, c.turn === null ? "" : `turn ${c.turn}` + (c.step === null ? "" : ` step ${c.step}`)),
      el("td", {}, c.model || ""), el("td", {}, (c.statuses || [c.status]).join(", ")),
      el("td", {class: "n"}, fmtMs(c.time_to_first_token_ms)), el("td", {class: "n"}, fmtMs(c.duration_ms)),
      el("td", {class: "n"}, num(c.input_other)), el("td", {class: "n"}, num(c.input_cache_read)), el("td", {class: "n"}, num(c.output)),
      el("td", {}, c.finish_reason || c.error || ""),
      el("td", {}, el("a", {class: "llmframes", onclick: (ev) => { ev.stopPropagation(); openFrames(key, c.seq); }}, "frames"))));
    box.appendChild(el("h2", {}, "Model calls ", el("span", {class: "legend"}, `${r.calls.length} · recorded with wire-proxy --llm · click a call for its request and streamed answer`)));
    box.appendChild(el("div", {class: "tablebox"}, el("table", {class: "idx spans", id: "llmtable"},
      el("thead", {}, el("tr", {}, ["call", "step", "model", "status", "first token", "duration", "in", "cache read", "out", "finish", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows))));
    box.appendChild(detail);
  }
  async function openCall(key, n, box) {
    let r;
    try { r = await api("llm", {k: key, call: n}); } catch (e) { return fail(e); }
    document.querySelectorAll("tr.llmrow.sel").forEach((x) => x.classList.remove("sel"));
    const tr = document.querySelector(`tr.llmrow[data-call="${Number(n)}"]`);
    if (tr) tr.classList.add("sel");
    const pd = r.prompt_diff;
    const attempts = r.attempts.map((a) => el("div", {class: "attempt", "data-n": a.n},
      el("div", {}, el("b", {}, `exchange ${a.n}`), ` · ${a.method || ""} ${a.path || ""} → ${a.status ?? "no answer"} ${a.reason || ""}`,
        a.chunks ? ` · ${a.chunks} chunks` : "", a.error ? el("span", {class: "bad"}, " · " + a.error) : null),
      el("div", {class: "sbs"},
        el("div", {}, el("b", {}, "request the agent sent", a.request_base64 ? " (base64: not UTF-8)" : ""), el("pre", {class: "llmreq"}, a.request_body ?? "(not stored)")),
        el("div", {}, el("b", {}, "streamed answer", a.response_base64 ? " (base64: not UTF-8)" : ""), el("pre", {class: "llmres"}, a.response_body ?? "(not stored)")))));
    put(box, el("h3", {}, `call ${r.call.call}` + (r.call.turn === null ? "" : ` · turn ${r.call.turn}` + (r.call.step === null ? "" : ` step ${r.call.step}`))),
      pd ? el("div", {id: "promptdiff"}, el("b", {}, r.previous === null ? "the prompt" : `prompt since call ${r.previous}`),
        el("span", {class: "muted"}, ` · ${pd.kept} message${pd.kept === 1 ? "" : "s"} kept` + (pd.dropped ? ` · ${pd.dropped} changed or dropped` : "") + ` · ${pd.added.length} added`),
        pd.added.map((m) => el("pre", {class: "added"}, m))) : el("div", {class: "muted"}, "the request has no message list to compare"),
      attempts);
    box.scrollIntoView();
  }

  route();
})();
