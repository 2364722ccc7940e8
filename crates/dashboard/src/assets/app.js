// deadletter dashboard: vanilla JavaScript, no dependencies. Every value from the store is
// written with textContent (never as HTML). Mutations carry the token in a custom header.
// This file holds the shared helpers, the queue table, the charts, one entry's panel and
// the start; list.js (loaded first) the DLQ list, its filters, pages and selection;
// guarded.js (loaded second) the failure fingerprints and guarded replays; workers.js
// (third) the worker pools attached and the rates.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const PAGE_SIZE = 25;
const REFRESH_MS = 10000;
const state = {
  token: "",
  stats: null,
  dlq: "",
  filter: {},
  // The page shown: after this cursor, or before it (the previous page), or the first.
  after: null,
  before: null,
  limit: PAGE_SIZE,
  page: null,
  // Selected entry ids: kept across refreshes and pages, cleared when the DLQ changes.
  selected: new Set(),
  entry: null,
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// The front ends' one form of a time: RFC 3339 in UTC, to the second (as the CLI prints).
function fmtTime(ms) {
  if (ms === null || ms === undefined) return "";
  return new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");
}

function fmtAge(ms) {
  if (ms === null || ms === undefined) return "–";
  // The two largest units, a zero second one left out, as the CLI prints ages.
  const two = (big, bigUnit, small, smallUnit) =>
    big + bigUnit + (small ? " " + small + smallUnit : "");
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60);
  if (m < 60) return two(m, "m", s % 60, "s");
  const h = Math.floor(m / 60);
  if (h < 48) return two(h, "h", m % 60, "m");
  return two(Math.floor(h / 24), "d", h % 24, "h");
}

function setStatus(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

async function api(path) {
  const headers = {};
  if (state.token) headers["X-Deadletter-Token"] = state.token;
  const res = await fetch(path, { headers, cache: "no-store" });
  const body = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

async function post(path, payload) {
  const res = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Deadletter-Token": state.token },
    body: JSON.stringify(payload),
  });
  const body = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

// ---- queues ---------------------------------------------------------------------------

function queueByDlq(name) {
  return (state.stats ? state.stats.queues : []).find((q) => q.dlq === name);
}

function renderQueues() {
  const body = $("queues").querySelector("tbody");
  body.replaceChildren();
  for (const q of state.stats.queues) {
    const d = q.dlq_stats || {};
    const cell = (field, value, cls) =>
      el("td", { class: cls || "num", "data-field": field, text: String(value) });
    const row = el(
      "tr",
      {
        class: "clickable" + (q.dlq === state.dlq ? " selected" : ""),
        "data-testid": "queue-row-" + q.queue,
        onclick: () => selectDlq(q.dlq),
      },
      el("td", { "data-field": "queue", text: q.queue }),
      cell("depth", q.depth),
      cell("in_flight", q.in_flight),
      cell("enqueued", q.enqueued),
      cell("acked", q.acked),
      cell("retried", q.retried),
      cell("dead_lettered", q.dead_lettered),
      cell("expired", q.expired),
      cell("oldest_message_age", fmtAge(q.oldest_message_age_ms)),
      el("td", { "data-field": "dlq", text: q.dlq }),
      cell("dlq_size", q.dlq_size, "num" + (q.dlq_size > 0 ? " bad" : "")),
      cell("dlq_pending", d.pending === undefined ? "" : d.pending),
      cell("dlq_oldest_age", fmtAge(q.dlq_oldest_age_ms)),
    );
    body.append(row);
  }
  const select = $("dlq-select");
  const current = state.dlq;
  select.replaceChildren(
    ...state.stats.queues.map((q) =>
      el("option", { value: q.dlq, text: q.dlq + " (" + q.dlq_size + ")" }),
    ),
  );
  select.value = current;
  $("store-dir").textContent = state.stats.dir;
  $("updated").textContent = "updated " + fmtTime(state.stats.at_ms);
}

function renderKinds() {
  const q = queueByDlq(state.dlq);
  const kinds = q && q.dlq_stats ? Object.entries(q.dlq_stats.by_error_kind) : [];
  const select = $("f-kind");
  const chosen = select.value;
  select.replaceChildren(
    el("option", { value: "", text: "any" }),
    ...kinds.map(([k, n]) => el("option", { value: k, text: k + " (" + n + ")" })),
  );
  select.value = kinds.some(([k]) => k === chosen) ? chosen : "";

  const box = $("kind-chart");
  box.replaceChildren();
  if (kinds.length === 0) {
    box.append(el("div", { class: "empty", text: "no entries in " + (state.dlq || "this DLQ") }));
    return;
  }
  kinds.sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const max = Math.max(...kinds.map(([, n]) => n));
  const rowH = 24;
  const width = 560;
  const labelW = 170;
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${kinds.length * rowH + 6}`,
    role: "img",
    "aria-label": "DLQ entries by error kind",
  });
  kinds.forEach(([kind, n], i) => {
    const y = i * rowH + 3;
    const w = Math.max(2, ((width - labelW - 50) * n) / max);
    chart.append(svg("text", { x: labelW - 8, y: y + 15, "text-anchor": "end", class: "label" }, kind));
    const bar = svg("rect", { x: labelW, y, width: w, height: rowH - 6, class: "bar", "data-kind": kind });
    bar.append(svg("title", {}, `${kind}: ${n}`));
    chart.append(bar);
    chart.append(svg("text", { x: labelW + w + 6, y: y + 15, class: "label" }, String(n)));
  });
  box.append(chart);
}

async function renderTimeline() {
  const box = $("timeline-chart");
  if (!state.dlq) {
    box.replaceChildren(el("div", { class: "empty", text: "no DLQ" }));
    return;
  }
  const hours = $("hours").value;
  const t = await api(`/api/timeline/${encodeURIComponent(state.dlq)}?hours=${hours}`);
  const n = t.buckets.length;
  const width = 560;
  const height = 170;
  const left = 34;
  const bottom = 22;
  const plotW = width - left - 6;
  const plotH = height - bottom - 8;
  const max = Math.max(1, ...t.buckets);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": "dead-letterings per hour",
  });
  chart.append(svg("line", { x1: left, y1: 8 + plotH, x2: width - 6, y2: 8 + plotH, class: "axis" }));
  chart.append(svg("text", { x: left - 4, y: 14, "text-anchor": "end" }, String(max)));
  chart.append(svg("text", { x: left - 4, y: 8 + plotH, "text-anchor": "end" }, "0"));
  const slot = plotW / n;
  // Label every few hours, or every day, week or fortnight on the longer windows.
  const labelEvery = n <= 24 ? 6 : n <= 48 ? 12 : n <= 168 ? 24 : n <= 720 ? 24 * 7 : 24 * 14;
  t.buckets.forEach((count, i) => {
    const start = t.start_ms + i * t.bucket_ms;
    const x = left + i * slot;
    if (count > 0) {
      const h = (plotH * count) / max;
      const bar = svg("rect", {
        x: x + 1,
        y: 8 + plotH - h,
        width: Math.max(1, slot - 2),
        height: h,
        class: "bar",
      });
      bar.append(svg("title", {}, `${fmtTime(start)}: ${count}`));
      chart.append(bar);
    }
    const d = new Date(start);
    const hourNumber = Math.floor(start / t.bucket_ms);
    if (hourNumber % labelEvery === 0) {
      const label = labelEvery >= 24
        ? d.toISOString().slice(5, 10)
        : String(d.getUTCHours()).padStart(2, "0") + ":00";
      chart.append(svg("text", { x, y: height - 6 }, label));
    }
  });
  const total = t.buckets.reduce((a, b) => a + b, 0);
  box.replaceChildren(chart);
  box.append(
    el("div", {
      class: "muted",
      text:
        `${total} dead-lettered in this window (UTC hours), ${t.earlier} earlier` +
        (t.persisted ? "" : " (of the entries still held: this backend keeps no history)"),
    }),
  );
}

// ---- one entry ------------------------------------------------------------------------

function hexDump(bytes) {
  const lines = [];
  for (let off = 0; off < bytes.length; off += 16) {
    const chunk = bytes.slice(off, off + 16);
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(chunk, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(off.toString(16).padStart(8, "0") + "  " + hex.padEnd(48) + "  " + ascii);
  }
  return lines.join("\n");
}

function base64Bytes(text) {
  const bin = atob(text);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

async function showEntry(id, { scroll = true } = {}) {
  try {
    const e = await api(`/api/entry/${id}`);
    state.entry = id;
    writeAddress();
    $("entry-section").hidden = false;
    $("entry-id").textContent = `${e.id} in ${e.dlq_name}`;
    const dl = $("entry-summary");
    dl.replaceChildren();
    const add = (k, v) => dl.append(el("dt", { text: k }), el("dd", { text: v }));
    const status = typeof e.status === "string" ? e.status : JSON.stringify(e.status);
    add("Status", status);
    dl.lastChild.dataset.testid = "entry-status";
    add("Queue", e.metadata.queue);
    add("Error", `${e.failure.error_kind}: ${e.failure.error_message}`);
    if (e.failure.details) add("Details", e.failure.details);
    add("Dead-lettered", fmtTime(e.dlq.dead_lettered_at_ms));
    add("Enqueued", fmtTime(e.metadata.enqueued_at_ms));
    add("Deliveries", String(e.metadata.delivery_count));
    add("Replays before", String(e.generation));
    if (e.dlq.worker) add("Worker", e.dlq.worker);
    for (const [k, v] of Object.entries(e.failure.context)) add("Context " + k, v);
    for (const [k, v] of Object.entries(e.metadata.attributes)) add("Attribute " + k, v);
    for (const [k, v] of Object.entries(e.dlq.tags)) add("Tag " + k, v);
    if (e.dlq.expires_at_ms) add("Retention until", fmtTime(e.dlq.expires_at_ms));

    const attempts = $("entry-attempts").querySelector("tbody");
    attempts.replaceChildren(
      ...e.failure.attempts.map((a) =>
        el(
          "tr",
          {},
          el("td", { class: "num", text: String(a.number) }),
          el("td", { text: fmtTime(a.at_ms) }),
          el("td", { text: a.error_kind }),
          el("td", { text: a.error_message }),
          el("td", { class: "num", text: a.duration_ms + " ms" }),
          el("td", { text: a.worker || "" }),
        ),
      ),
    );
    const bytes = base64Bytes(e.payload);
    if (e.payload_text !== undefined) {
      $("payload-kind").textContent = `(${bytes.length} bytes, UTF-8 text)`;
      $("entry-payload").textContent = e.payload_text;
    } else {
      $("payload-kind").textContent = `(${bytes.length} bytes, binary: hex)`;
      $("entry-payload").textContent = hexDump(bytes);
    }
    $("entry-json").textContent = JSON.stringify(e, null, 2);
    // Edit-then-replay: a text payload opens in a text area; the entry goes back with what
    // it holds, refused if it was replayed since this generation was read.
    $("entry-edit").hidden = true;
    const edit =
      e.payload_text === undefined
        ? []
        : [
            el("button", {
              type: "button",
              text: "Edit payload, then replay",
              "data-testid": "entry-edit",
              onclick: () => {
                $("entry-payload-edit").value = e.payload_text;
                $("entry-edit").hidden = false;
                $("entry-payload-edit").focus();
              },
            }),
          ];
    $("entry-replay-edited").onclick = () => replayEdited(id, e.generation, $("entry-payload-edit").value);
    $("entry-edit-cancel").onclick = () => ($("entry-edit").hidden = true);
    $("entry-actions").replaceChildren(
      el("a", { href: addressOf(id), text: "Link to this entry", "data-testid": "entry-link" }),
      el("button", { type: "button", class: "primary", text: "Replay this entry", "data-testid": "entry-replay", onclick: () => replayIds([id]) }),
      ...edit,
      el("button", {
        type: "button",
        class: "danger",
        text: "Delete this entry",
        "data-testid": "entry-delete",
        onclick: (ev) => {
          if (armed(ev.currentTarget, "Click again to delete entry " + id)) deleteIds([id]);
        },
      }),
    );
    if (scroll) $("entry-section").scrollIntoView({ behavior: "smooth", block: "start" });
  } catch (err) {
    setStatus(`Entry ${id}: ${err.message}`, true);
    closeEntry();
  }
}

function closeEntry() {
  state.entry = null;
  $("entry-section").hidden = true;
  writeAddress();
}

// ---- wiring ---------------------------------------------------------------------------

async function selectDlq(name) {
  if (name !== state.dlq) state.selected.clear();
  state.dlq = name;
  toFirstPage();
  $("filters").reset();
  state.filter = {};
  writeAddress();
  await refresh();
}

// Reloads everything shown: the queue table, the charts and the current page of the list
// (the same cursor, the same selection).
async function refresh() {
  try {
    state.stats = await api("/api/stats");
    if (!state.dlq || !queueByDlq(state.dlq)) {
      const withEntries = state.stats.queues.find((q) => q.dlq_size > 0);
      state.dlq = (withEntries || state.stats.queues[0] || {}).dlq || "";
    }
    renderQueues();
    renderKinds();
    await Promise.all([renderTimeline(), loadEntries(), loadFingerprints(), loadGuarded(), loadWorkers()]);
    document.body.dataset.loaded = String(Date.now());
  } catch (err) {
    setStatus("Cannot load: " + err.message, true);
  }
}

function autoRefresh() {
  // Not while hidden, and not between the two clicks of a destructive button.
  if (document.visibilityState !== "visible" || anyArmed()) return;
  refresh().then(() => {
    document.body.dataset.refreshed = String(Date.now());
  });
}

async function init() {
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    state.token = decodeURIComponent(match[1]);
    sessionStorage.setItem("deadletter-token", state.token);
  } else {
    state.token = sessionStorage.getItem("deadletter-token") || "";
  }
  readAddress();
  // The address keeps the view (filters, page, entry), never the token.
  writeAddress();
  $("token").value = state.token;
  $("token").addEventListener("change", () => {
    state.token = $("token").value.trim();
    sessionStorage.setItem("deadletter-token", state.token);
  });
  $("refresh").addEventListener("click", refresh);
  $("hours").addEventListener("change", () => renderTimeline().catch((e) => setStatus(e.message, true)));
  $("dlq-select").addEventListener("change", (ev) => selectDlq(ev.target.value));
  $("close-entry").addEventListener("click", closeEntry);
  const mark = (success) => {
    if (state.entry !== null) markIds([state.entry], success, $("entry-note").value.trim());
  };
  $("entry-mark-ok").addEventListener("click", () => mark(true));
  $("entry-mark-failed").addEventListener("click", () => mark(false));
  wireList();
  wireGuarded();
  setStatus(state.token ? "Ready." : "Read-only until a token is entered.");
  const entry = state.entry;
  await refresh();
  fillForm();
  if (entry !== null) await showEntry(entry);
  setInterval(autoRefresh, REFRESH_MS);
}

init();
