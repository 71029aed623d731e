// The interlink page: reads the home through /api, redraws on every `change` event.
// Peer text is only ever set as textContent: nothing a peer writes becomes markup.
"use strict";

const csrf = document.querySelector('meta[name="csrf"]').content;
let overview = null;
let openThread = null; // {session, peer, peer_session, label}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

async function get(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function post(path, data) {
  const r = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", "x-interlink-csrf": csrf },
    body: JSON.stringify(data),
  });
  const text = await r.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { error: text }; }
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function when(ms) {
  const d = new Date(ms);
  return d.toISOString().replace("T", " ").slice(0, 16) + "Z";
}

// The page's own session: the human's messages come from it.
const PAGE = "user-page";

function peerLabel(own, name, key, session) {
  if (own && session === PAGE) return "you (this page)";
  if (own) return "you/" + session;
  return (name || key.slice(0, 12)) + "/" + session;
}

function who(m) {
  return peerLabel(m.own, m.peer_name, m.peer, m.peer_session);
}

function message(m) {
  const state = m.own && m.peer_session === PAGE && m.direction === "in" ? "from you" : m.state;
  const meta = el("div", { class: "meta" },
    el("span", {}, when(m.at)),
    el("span", {}, m.direction === "out" ? m.session + " → " + who(m) : who(m) + " → " + m.session),
    el("span", { class: "badge state-" + state.replace(" ", "_"), "data-state": m.state }, state));
  if (m.consumed !== undefined) {
    meta.append(el("span", {
      class: "badge " + (m.consumed ? "state-consumed" : ""),
      title: m.consumed ? "its agent has it: acknowledged, or handed to its host" : "not yet consumed by its agent",
    }, m.consumed ? "consumed" : "unread"));
  }
  if (m.task_id) meta.append(el("span", { class: "badge" }, "task " + m.task_id + (m.status ? " · " + m.status : "")));
  if (m.group) meta.append(el("span", { class: "badge" }, "group " + m.group));
  if (m.held_by) {
    const h = m.held_by;
    const where = [h.outbox ? "this session's outbox" : null,
      h.relays_asked ? h.relays_asked + (h.relays_asked === 1 ? " relay" : " relays") : null,
      h.peers_asked ? h.peers_asked + (h.peers_asked === 1 ? " peer" : " peers") : null].filter(Boolean);
    meta.append(el("span", { class: "badge", "data-held": "1" }, "held by " + (where.join(", ") || "nobody yet")));
  }
  if (m.in_reply_to) meta.append(el("span", { class: "note", title: m.in_reply_to }, "↩ reply to " + m.in_reply_to.slice(0, 8)));
  const item = el("li", { class: m.direction, "data-id": m.id, "data-state": m.state }, meta, el("div", { class: "text" }, m.text));
  if (m.consumed !== undefined) item.dataset.consumed = m.consumed ? "1" : "0";
  return item;
}

// The overlay's sessions by their label on the page (`bob/b1`, `you/a2`).
function overlaySessions(o) {
  const map = new Map();
  for (const i of (o.overlay && o.overlay.identities) || []) {
    const who = i.own ? "you" : (i.petname || i.fingerprint);
    for (const s of i.sessions) map.set(who + "/" + s.session_id, Object.assign({ who }, s));
  }
  return map;
}

function describe(s) {
  const parts = [s.presence];
  if (s.host) parts.push(s.host);
  if (s.git_label) parts.push(s.git_label);
  if (s.summary) parts.push(s.summary);
  if (s.private) parts.push("details sealed for others");
  return parts.join(" · ");
}

function drawIdentities(o) {
  const list = document.getElementById("identities");
  list.replaceChildren();
  const ids = (o.overlay && o.overlay.identities) || [];
  if (!o.overlay) list.append(el("li", {}, "The page could not join the overlay (see the log of `interlink-p2p ui`)."));
  else if (!ids.length) list.append(el("li", {}, "No session seen on the overlay yet."));
  for (const i of ids) {
    const who = i.own ? "you" : (i.petname || "not paired");
    for (const s of i.sessions) {
      list.append(el("li", { "data-overlay-session": (i.own ? "you" : (i.petname || i.fingerprint)) + "/" + s.session_id },
        el("strong", {}, who + "/" + s.session_id),
        el("span", { class: "badge presence-" + s.presence }, s.presence),
        el("span", { class: "note" }, describe(s).replace(/^[a-z]+( · )?/, "")),
        s.connected ? el("span", { class: "badge" }, "connected") : ""));
    }
  }
}

function drawOverlay(o) {
  const pic = document.getElementById("overlay");
  pic.replaceChildren();
  const width = pic.clientWidth || 900;
  const own = o.sessions;
  const others = new Map();
  for (const s of own) for (const l of s.links) others.set(l.session, true);
  for (const c of o.conversations) others.set(peerLabel(c.own, c.peer_name, c.peer, c.peer_session), true);
  for (const s of own) others.delete("you/" + s.id);
  const right = [...others.keys()].sort();
  const height = Math.max(own.length, right.length, 3) * 34 + 30;
  pic.setAttribute("viewBox", `0 0 ${width} ${height}`);
  pic.style.height = height + "px";
  const pos = new Map();
  own.forEach((s, i) => pos.set("you/" + s.id, [120, 30 + i * 34]));
  right.forEach((name, i) => pos.set(name, [width - 160, 30 + i * 34]));
  const edge = (a, b, cls) => {
    const p = pos.get(a), q = pos.get(b);
    if (!p || !q || a === b) return;
    const mid = (p[0] + q[0]) / 2;
    pic.append(svg("path", { d: `M${p[0]},${p[1]} C${mid},${p[1]} ${mid},${q[1]} ${q[0]},${q[1]}`, class: cls, fill: "none" }));
  };
  for (const s of own) for (const l of s.links) edge("you/" + s.id, l.session, l.route === "relayed" ? "edge-relayed" : "edge-direct");
  for (const c of o.conversations) edge("you/" + c.session, peerLabel(c.own, c.peer_name, c.peer, c.peer_session), "edge-talk");
  const seen = overlaySessions(o);
  for (const [name, [x, y]] of pos) {
    const mine = name.startsWith("you/") && own.some((s) => "you/" + s.id === name);
    const s = own.find((s) => "you/" + s.id === name);
    const far = seen.get(name);
    const cls = mine ? (s.live ? "node-live" : "node-gone") : "node-peer" + (far ? " presence-" + far.presence : "");
    const dot = svg("circle", { cx: x, cy: y, r: 9, class: cls, "data-node": name });
    const title = svg("title", {});
    title.textContent = far ? describe(far) : (mine ? (s.live ? "running" : "stopped") : "not on the overlay now");
    dot.append(title);
    pic.append(dot);
    const t = svg("text", { x: mine ? x - 14 : x + 14, y: y + 4, "text-anchor": mine ? "end" : "start" });
    t.textContent = mine ? s.id + (s.live ? "" : " (stopped)") : name + (far ? " · " + far.presence + (far.host ? " · " + far.host : "") : "");
    pic.append(t);
  }
}

function render(o) {
  overview = o;
  const me = document.getElementById("me");
  me.textContent = (o.me.name || "") + (o.me.fingerprint ? "  " + o.me.fingerprint : "");
  drawOverlay(o);
  drawIdentities(o);

  const conv = document.getElementById("conversations");
  conv.replaceChildren();
  if (!o.conversations.length) conv.append(el("li", {}, "No messages yet."));
  const sorted = [...o.conversations].sort((a, b) => b.last_at - a.last_at);
  for (const c of sorted) {
    const label = c.session + " ⇄ " + peerLabel(c.own, c.peer_name, c.peer, c.peer_session);
    conv.append(el("li", {
      class: "clickable", "data-session": c.session, "data-peer-session": c.peer_session,
      onclick: () => showThread({ session: c.session, peer: c.peer, peer_session: c.peer_session, label }),
    }, el("strong", {}, label), el("span", { class: "badge" }, c.count + (c.count === 1 ? " message" : " messages")),
       el("span", { class: "badge state-" + c.last_state }, c.last_state),
       el("span", { class: "note" }, c.last_text)));
  }

  const requests = document.getElementById("requests");
  requests.replaceChildren();
  const incoming = (o.pairing && o.pairing.incoming) || [];
  if (!incoming.length) requests.append(el("li", {}, "None waiting."));
  for (const r of incoming) {
    requests.append(el("li", { "data-fingerprint": r.fingerprint },
      el("strong", {}, r.fingerprint), el("span", {}, "suggests " + JSON.stringify(r.name || "-")),
      el("span", { class: "note" }, "session " + r.session),
      el("button", { onclick: () => act(() => post("/api/pair/accept", { fingerprint: r.fingerprint })) }, "Accept"),
      el("button", { class: "secondary", onclick: () => act(() => post("/api/pair/reject", { fingerprint: r.fingerprint })) }, "Reject")));
  }
  const peers = document.getElementById("peers");
  peers.replaceChildren();
  if (!o.peers.length) peers.append(el("li", {}, "No peers yet: pair with `interlink-p2p invite`."));
  for (const p of o.peers) {
    peers.append(el("li", { "data-peer": p.name },
      el("strong", {}, p.name), el("span", { class: "note" }, p.fingerprint),
      el("button", { class: "secondary", onclick: () => {
        const next = prompt("New name for " + p.name, p.name);
        if (next && next !== p.name) act(() => post("/api/peer", { action: "rename", old: p.name, new: next }));
      } }, "Rename"),
      el("button", { class: "secondary", onclick: () => {
        if (confirm("Remove " + p.name + "? Its sessions can no longer reach yours.")) act(() => post("/api/peer", { action: "remove", name: p.name }));
      } }, "Remove")));
  }
  const claims = document.querySelector("#claims tbody");
  claims.replaceChildren();
  for (const board of o.claims) {
    for (const c of board.claims) {
      claims.append(el("tr", {},
        el("td", {}, board.root.split(/[\\/]/).pop()),
        el("td", {}, (c.name || c.key.slice(0, 12)) + "/" + c.session),
        el("td", {}, c.pattern), el("td", {}, c.exclusive ? "exclusive" : "shared"),
        el("td", {}, c.reason), el("td", {}, c.held ? "holds" : "waits")));
    }
  }
  if (!claims.children.length) claims.append(el("tr", {}, el("td", { colspan: 6 }, "No claims.")));
}

async function act(f) {
  try { const r = await f(); if (r.done) note(r.done); } catch (e) { note("refused: " + e.message); }
  refresh();
}

function note(text) {
  document.getElementById("search-note").textContent = text;
}

async function showThread(t) {
  openThread = t;
  document.getElementById("thread-section").hidden = false;
  document.getElementById("thread-title").textContent = t.label;
  document.getElementById("write-label").textContent = "Write to " + t.session + " as yourself (its user)";
  await refreshThread();
}

async function refreshThread() {
  if (!openThread) return;
  const q = new URLSearchParams({ session: openThread.session, peer: openThread.peer, peer_session: openThread.peer_session });
  const r = await get("/api/thread?" + q);
  const list = document.getElementById("thread");
  list.replaceChildren(...r.messages.map(message));
  list.scrollTop = list.scrollHeight;
}

// Refreshes may overlap (a change event during a slow read): only the newest one's
// answer is drawn.
let asked = 0;
async function refresh() {
  const mine = ++asked;
  try {
    const o = await get("/api/overview");
    if (mine !== asked) return;
    render(o);
    await refreshThread();
  } catch (e) {
    document.getElementById("live").textContent = "error: " + e.message;
  }
}

let pending = null;
function changed() {
  clearTimeout(pending);
  pending = setTimeout(refresh, 50);
}

document.getElementById("search").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const q = new URLSearchParams({
    q: document.getElementById("q").value,
    peer: document.getElementById("search-peer").value,
    session: document.getElementById("search-session").value,
    state: document.getElementById("search-state").value,
  });
  const hours = document.getElementById("search-hours").value;
  if (hours) q.set("hours", hours);
  try {
    const r = await get("/api/search?" + q);
    document.getElementById("results").replaceChildren(...r.messages.map(message));
    note(`${r.messages.length}${r.more ? "+" : ""} found in ${r.ms.toFixed(1)} ms`);
  } catch (e) { note("search failed: " + e.message); }
});

document.getElementById("write").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  if (!openThread) return;
  const text = document.getElementById("write-text").value.trim();
  if (!text) return;
  const out = document.getElementById("write-result");
  out.textContent = "sending…";
  try {
    const r = await post("/api/send", { session: openThread.session, text });
    out.textContent = r.done;
    document.getElementById("write-text").value = "";
  } catch (e) { out.textContent = "not sent: " + e.message; }
});

document.getElementById("invite").addEventListener("click", async () => {
  const note = document.getElementById("invite-note");
  note.textContent = "making a code…";
  try {
    const r = await post("/api/invite", {});
    document.getElementById("invite-code").textContent = r.code;
    note.textContent = `Valid ${r.minutes} minutes, for one person. ${r.done}`;
  } catch (e) { note.textContent = "no invite: " + e.message; }
});

const events = new EventSource("/api/events");
events.addEventListener("change", () => {
  document.getElementById("live").textContent = "live";
  changed();
});
events.onerror = () => { document.getElementById("live").textContent = "reconnecting…"; };
refresh();
