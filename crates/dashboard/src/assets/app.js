// deadletter dashboard: vanilla JavaScript, no dependencies. Every value from the store is
// written with textContent (never as HTML). Mutations carry the token in a custom header.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const state = {
  token: "",
  stats: null,
  dlq: "",
  filter: {},
  cursors: [],
  after: null,
  nextCursor: null,
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
  const labelEvery = n <= 24 ? 6 : n <= 48 ? 12 : 24;
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
    if (d.getUTCHours() % labelEvery === 0) {
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
      text: `${total} in this window (UTC hours), ${t.earlier} earlier`,
    }),
  );
}

// ---- entries --------------------------------------------------------------------------

function filterFromForm() {
  const form = $("filters");
  const f = {};
  const v = (name) => form.elements[name].value.trim();
  if (v("error_kind")) f.error_kind = v("error_kind");
  if (v("message")) f.message = v("message");
  if (v("since")) f.since_ms = Date.parse(v("since") + "Z");
  if (v("until")) f.until_ms = Date.parse(v("until") + "Z");
  if (v("min_attempts")) f.min_attempts = Number(v("min_attempts"));
  if (v("max_attempts")) f.max_attempts = Number(v("max_attempts"));
  if (v("status")) f.status = v("status");
  return f;
}

function queryOf(filter, extra) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...filter, ...extra })) {
    if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
  }
  return params.toString();
}

async function loadEntries() {
  const body = $("entries").querySelector("tbody");
  if (!state.dlq) {
    body.replaceChildren();
    $("matched").textContent = "";
    return;
  }
  const q = queryOf(state.filter, { after: state.after, limit: 25 });
  const page = await api(`/api/dlq/${encodeURIComponent(state.dlq)}?${q}`);
  state.nextCursor = page.next_cursor;
  $("matched").textContent = `${page.matched} matching`;
  $("next-page").disabled = page.next_cursor === null;
  $("first-page").disabled = state.after === null;
  $("replay-matching").textContent = `Replay all matching (${page.matched})`;
  $("delete-matching").textContent = `Delete all matching (${page.matched})`;
  resetConfirm($("replay-matching"));
  resetConfirm($("delete-matching"));
  body.replaceChildren();
  if (page.entries.length === 0) {
    body.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "no entries match" })));
  }
  for (const e of page.entries) {
    const status = e.status === "pending" ? "pending" : e.status.replace("_", " ");
    body.append(
      el(
        "tr",
        { "data-testid": "entry-row-" + e.id, "data-id": String(e.id) },
        el("td", { class: "num", text: String(e.id) }),
        el("td", { text: fmtTime(e.dead_lettered_at_ms) }),
        el("td", { text: e.error_kind }),
        el("td", { class: "msg", title: e.error_message, text: e.error_message }),
        el("td", { class: "num", text: String(e.attempts) }),
        el("td", { text: status }),
        el("td", {
          class: "payload",
          title: e.payload_is_text ? e.payload_preview : "binary, hex",
          text: (e.payload_is_text ? "" : "0x") + e.payload_preview,
        }),
        el(
          "td",
          { class: "actions" },
          el("button", { type: "button", text: "View", "data-testid": "view-" + e.id, onclick: () => showEntry(e.id) }),
          " ",
          el("button", { type: "button", text: "Replay", "data-testid": "replay-" + e.id, onclick: () => replayIds([e.id]) }),
          " ",
          el("button", { type: "button", class: "danger", text: "Delete", "data-testid": "delete-" + e.id, onclick: () => deleteIds([e.id]) }),
        ),
      ),
    );
  }
}

function replayOptions() {
  const to = $("replay-to").value.trim();
  return {
    to: to || undefined,
    reset_attempts: $("reset-attempts").checked,
    force: $("force").checked,
  };
}

function requireToken() {
  if (state.token) return true;
  setStatus("Enter the token printed by `deadletter serve` to replay or delete.", true);
  $("token").focus();
  return false;
}

async function replayIds(ids) {
  if (!requireToken()) return;
  try {
    const r = await post("/api/replay", { dlq: state.dlq, ids, ...replayOptions() });
    const target = replayOptions().to || (queueByDlq(state.dlq) || {}).queue;
    report(`Replayed ${r.replayed.length} entr${r.replayed.length === 1 ? "y" : "ies"} to ${target}`, r);
  } catch (err) {
    setStatus("Replay failed: " + err.message, true);
  }
  await refresh();
}

async function deleteIds(ids) {
  if (!requireToken()) return;
  try {
    const r = await post("/api/delete", { dlq: state.dlq, ids });
    setStatus(`Deleted ${r.deleted} entr${r.deleted === 1 ? "y" : "ies"}`);
    if (state.entry !== null && ids.includes(state.entry)) closeEntry();
  } catch (err) {
    setStatus("Delete failed: " + err.message, true);
  }
  await refresh();
}

function report(text, r) {
  if (r.failed && r.failed.length > 0) {
    setStatus(`${text}; ${r.failed.length} refused: ${r.failed.map((f) => f.id + " " + f.reason).join("; ")}`, true);
  } else {
    setStatus(text);
  }
}

// A bulk button asks for a second click instead of a dialog.
function resetConfirm(button) {
  button.classList.remove("confirm");
  delete button.dataset.armed;
}

function armed(button, label) {
  if (button.dataset.armed) {
    resetConfirm(button);
    return true;
  }
  button.dataset.armed = "1";
  button.classList.add("confirm");
  button.textContent = label;
  setTimeout(() => resetConfirm(button), 5000);
  return false;
}

async function bulk(action) {
  if (!requireToken()) return;
  const button = $(action === "replay" ? "replay-matching" : "delete-matching");
  if (!armed(button, `Click again to ${action} every matching entry`)) return;
  try {
    if (action === "replay") {
      const r = await post("/api/replay", { dlq: state.dlq, filter: state.filter, ...replayOptions() });
      report(`Replayed ${r.replayed.length} matching entries`, r);
    } else {
      const r = await post("/api/delete", { dlq: state.dlq, filter: state.filter });
      setStatus(`Deleted ${r.deleted} matching entries`);
      closeEntry();
    }
  } catch (err) {
    setStatus(`${action} failed: ${err.message}`, true);
  }
  state.after = null;
  state.cursors = [];
  await refresh();
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

async function showEntry(id) {
  try {
    const e = await api(`/api/entry/${id}`);
    state.entry = id;
    $("entry-section").hidden = false;
    $("entry-id").textContent = `${e.id} in ${e.dlq_name}`;
    const dl = $("entry-summary");
    dl.replaceChildren();
    const add = (k, v) => dl.append(el("dt", { text: k }), el("dd", { text: v }));
    const status = typeof e.status === "string" ? e.status : JSON.stringify(e.status);
    add("Status", status);
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
    $("entry-actions").replaceChildren(
      el("button", { type: "button", class: "primary", text: "Replay this entry", "data-testid": "entry-replay", onclick: () => replayIds([id]) }),
      el("button", { type: "button", class: "danger", text: "Delete this entry", onclick: () => deleteIds([id]) }),
    );
    $("entry-section").scrollIntoView({ behavior: "smooth", block: "start" });
  } catch (err) {
    setStatus(`Entry ${id}: ${err.message}`, true);
  }
}

function closeEntry() {
  state.entry = null;
  $("entry-section").hidden = true;
}

// ---- wiring ---------------------------------------------------------------------------

async function selectDlq(name) {
  state.dlq = name;
  state.after = null;
  state.cursors = [];
  $("filters").reset();
  state.filter = {};
  await refresh();
}

async function refresh() {
  try {
    state.stats = await api("/api/stats");
    if (!state.dlq || !queueByDlq(state.dlq)) {
      const withEntries = state.stats.queues.find((q) => q.dlq_size > 0);
      state.dlq = (withEntries || state.stats.queues[0] || {}).dlq || "";
    }
    renderQueues();
    renderKinds();
    await Promise.all([renderTimeline(), loadEntries()]);
    document.body.dataset.loaded = String(Date.now());
  } catch (err) {
    setStatus("Cannot load: " + err.message, true);
  }
}

function init() {
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    state.token = decodeURIComponent(match[1]);
    sessionStorage.setItem("deadletter-token", state.token);
    history.replaceState(null, "", location.pathname + location.search);
  } else {
    state.token = sessionStorage.getItem("deadletter-token") || "";
  }
  $("token").value = state.token;
  $("token").addEventListener("change", () => {
    state.token = $("token").value.trim();
    sessionStorage.setItem("deadletter-token", state.token);
  });
  $("refresh").addEventListener("click", refresh);
  $("hours").addEventListener("change", () => renderTimeline().catch((e) => setStatus(e.message, true)));
  $("dlq-select").addEventListener("change", (ev) => selectDlq(ev.target.value));
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.filter = filterFromForm();
    state.after = null;
    state.cursors = [];
    loadEntries().catch((e) => setStatus(e.message, true));
  });
  $("clear-filters").addEventListener("click", () => {
    $("filters").reset();
    state.filter = {};
    state.after = null;
    state.cursors = [];
    loadEntries().catch((e) => setStatus(e.message, true));
  });
  $("next-page").addEventListener("click", () => {
    if (state.nextCursor === null) return;
    state.cursors.push(state.after);
    state.after = state.nextCursor;
    loadEntries().catch((e) => setStatus(e.message, true));
  });
  $("first-page").addEventListener("click", () => {
    state.after = null;
    state.cursors = [];
    loadEntries().catch((e) => setStatus(e.message, true));
  });
  $("replay-matching").addEventListener("click", () => bulk("replay"));
  $("delete-matching").addEventListener("click", () => bulk("delete"));
  $("close-entry").addEventListener("click", closeEntry);
  setStatus(state.token ? "Ready." : "Read-only until a token is entered.");
  refresh();
  setInterval(() => {
    if (document.visibilityState === "visible") {
      api("/api/stats")
        .then((s) => {
          state.stats = s;
          renderQueues();
        })
        .catch(() => {});
    }
  }, 10000);
}

init();
