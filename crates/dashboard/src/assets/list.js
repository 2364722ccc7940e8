// deadletter dashboard, the DLQ list: filters (kept in the page's address, so a view can be
// bookmarked or shared), pages both ways by cursor, row selection and the actions on the
// selection or on every matching entry. Loaded before app.js, which holds the shared
// helpers (state, el, api, post, setStatus) and starts the page.
"use strict";

// ---- the address: ?dlq=&filters&after=|before=&limit=&entry= ---------------------------

// Filter keys as the API's list query names them (attributes and tags are attr.K / tag.K).
const FILTER_KEYS = ["error_kind", "message", "payload", "status", "since_ms", "until_ms", "min_attempts", "max_attempts", "fingerprint"];

function filterParams(filter) {
  const params = new URLSearchParams();
  for (const k of FILTER_KEYS) {
    if (filter[k] !== undefined && filter[k] !== "") params.set(k, String(filter[k]));
  }
  for (const [k, v] of Object.entries(filter.attributes || {})) params.set("attr." + k, v);
  for (const [k, v] of Object.entries(filter.tags || {})) params.set("tag." + k, v);
  return params;
}

function readAddress() {
  const params = new URLSearchParams(location.search);
  const filter = {};
  for (const [k, v] of params) {
    if (v === "") continue;
    if (FILTER_KEYS.includes(k)) {
      filter[k] = /_ms$|_attempts$/.test(k) ? Number(v) : v;
    } else if (k.startsWith("attr.")) {
      (filter.attributes = filter.attributes || {})[k.slice(5)] = v;
    } else if (k.startsWith("tag.")) {
      (filter.tags = filter.tags || {})[k.slice(4)] = v;
    }
  }
  state.dlq = params.get("dlq") || "";
  state.filter = filter;
  state.after = params.get("after");
  state.before = state.after ? null : params.get("before");
  const limit = Number(params.get("limit"));
  state.limit = Number.isSafeInteger(limit) && limit >= 1 && limit <= 500 ? limit : PAGE_SIZE;
  const entry = Number(params.get("entry"));
  state.entry = Number.isSafeInteger(entry) && entry > 0 ? entry : null;
}

function addressOf(entry) {
  const params = filterParams(state.filter);
  if (state.dlq) params.set("dlq", state.dlq);
  if (state.after) params.set("after", state.after);
  if (state.before) params.set("before", state.before);
  if (state.limit !== PAGE_SIZE) params.set("limit", String(state.limit));
  if (entry !== null && entry !== undefined) params.set("entry", String(entry));
  const q = params.toString();
  return location.pathname + (q ? "?" + q : "");
}

function writeAddress() {
  history.replaceState(null, "", addressOf(state.entry));
}

// ---- the filter form ------------------------------------------------------------------

// "key=value, key2=value2" <-> {key: value}
function parsePairs(text) {
  const out = {};
  for (const part of text.split(",")) {
    const at = part.indexOf("=");
    if (at > 0) out[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  return out;
}

function pairsText(map) {
  return Object.entries(map || {}).map(([k, v]) => k + "=" + v).join(", ");
}

function isoMinute(ms) {
  return new Date(ms).toISOString().slice(0, 16);
}

function filterFromForm() {
  const form = $("filters");
  const f = {};
  const v = (name) => form.elements[name].value.trim();
  if (v("error_kind")) f.error_kind = v("error_kind");
  if (v("message")) f.message = v("message");
  if (v("payload")) f.payload = v("payload");
  if (v("since")) f.since_ms = Date.parse(v("since") + "Z");
  if (v("until")) f.until_ms = Date.parse(v("until") + "Z");
  if (v("min_attempts")) f.min_attempts = Number(v("min_attempts"));
  if (v("max_attempts")) f.max_attempts = Number(v("max_attempts"));
  if (v("status")) f.status = v("status");
  if (v("fingerprint")) f.fingerprint = v("fingerprint").toLowerCase();
  const attributes = parsePairs(v("attributes"));
  if (Object.keys(attributes).length) f.attributes = attributes;
  const tags = parsePairs(v("tags"));
  if (Object.keys(tags).length) f.tags = tags;
  return f;
}

function fillForm() {
  const form = $("filters");
  const f = state.filter;
  const set = (name, value) => {
    form.elements[name].value = value === undefined || value === null ? "" : String(value);
  };
  // The error-kind list is filled from the DLQ's stats; keep the wanted kind as an option.
  if (f.error_kind && ![...$("f-kind").options].some((o) => o.value === f.error_kind)) {
    $("f-kind").append(el("option", { value: f.error_kind, text: f.error_kind }));
  }
  set("error_kind", f.error_kind);
  set("message", f.message);
  set("payload", f.payload);
  set("status", f.status);
  set("since", f.since_ms ? isoMinute(f.since_ms) : "");
  set("until", f.until_ms ? isoMinute(f.until_ms) : "");
  set("min_attempts", f.min_attempts);
  set("max_attempts", f.max_attempts);
  set("fingerprint", f.fingerprint);
  set("attributes", pairsText(f.attributes));
  set("tags", pairsText(f.tags));
}

function toFirstPage() {
  state.after = null;
  state.before = null;
}

// ---- the list -------------------------------------------------------------------------

function statusText(s) {
  return s === "pending" ? "pending" : s.replace("_", " ");
}

function entryLink(id) {
  return el("a", {
    href: addressOf(id),
    text: String(id),
    "data-testid": "link-" + id,
    onclick: (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
      ev.preventDefault();
      showEntry(id);
    },
  });
}

async function loadEntries() {
  const body = $("entries").querySelector("tbody");
  if (!state.dlq) {
    body.replaceChildren();
    $("matched").textContent = "";
    return;
  }
  const params = filterParams(state.filter);
  params.set("limit", String(state.limit));
  if (state.after) params.set("after", state.after);
  if (state.before) params.set("before", state.before);
  const page = await api(`/api/dlq/${encodeURIComponent(state.dlq)}?${params}`);
  state.page = page;
  $("matched").textContent = `${page.matched} matching`;
  $("next-page").disabled = page.next_cursor === null;
  $("prev-page").disabled = page.prev_cursor === null;
  $("first-page").disabled = page.prev_cursor === null;
  setLabel($("replay-matching"), `Replay all matching (${page.matched})`);
  $("guarded-matching").textContent = `Guarded replay of all matching (${page.matched})`;
  setLabel($("delete-matching"), `Delete all matching (${page.matched})`);
  body.replaceChildren();
  if (page.entries.length === 0) {
    body.append(el("tr", {}, el("td", { colspan: 9, class: "muted", text: "no entries match" })));
  }
  for (const e of page.entries) {
    const box = el("input", {
      type: "checkbox",
      "aria-label": "select entry " + e.id,
      "data-testid": "select-" + e.id,
      onchange: (ev) => {
        if (ev.target.checked) state.selected.add(e.id);
        else state.selected.delete(e.id);
        renderSelection();
      },
    });
    box.checked = state.selected.has(e.id);
    body.append(
      el(
        "tr",
        { "data-testid": "entry-row-" + e.id, "data-id": String(e.id), class: box.checked ? "picked" : null },
        el("td", {}, box),
        el("td", { class: "num" }, entryLink(e.id)),
        el("td", { text: fmtTime(e.dead_lettered_at_ms) }),
        el("td", { text: e.error_kind }),
        el("td", { class: "msg", title: e.error_message, text: e.error_message }),
        el("td", { class: "num", text: String(e.attempts) }),
        el("td", { "data-field": "status", text: statusText(e.status) }),
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
          el("button", {
            type: "button",
            class: "danger",
            text: "Delete",
            "data-testid": "delete-" + e.id,
            onclick: (ev) => {
              if (armed(ev.currentTarget, "Click again to delete " + e.id)) deleteIds([e.id]);
            },
          }),
        ),
      ),
    );
  }
  renderSelection();
}

// ---- selection ------------------------------------------------------------------------

function renderSelection() {
  const n = state.selected.size;
  $("selected-count").textContent = `${n} selected`;
  for (const id of ["replay-selected", "delete-selected", "mark-selected-ok", "mark-selected-failed", "clear-selection", "guarded-selected"]) {
    $(id).disabled = n === 0;
  }
  setLabel($("delete-selected"), n ? `Delete selected (${n})` : "Delete selected");
  $("replay-selected").textContent = n ? `Replay selected (${n})` : "Replay selected";
  const boxes = [...document.querySelectorAll("#entries tbody input[type=checkbox]")];
  for (const box of boxes) box.closest("tr").classList.toggle("picked", box.checked);
  const all = $("select-page");
  all.checked = boxes.length > 0 && boxes.every((b) => b.checked);
  all.indeterminate = !all.checked && boxes.some((b) => b.checked);
}

function selectPage(on) {
  for (const e of (state.page || { entries: [] }).entries) {
    if (on) state.selected.add(e.id);
    else state.selected.delete(e.id);
  }
  for (const box of document.querySelectorAll("#entries tbody input[type=checkbox]")) box.checked = on;
  renderSelection();
}

function clearSelection() {
  state.selected.clear();
  for (const box of document.querySelectorAll("#entries tbody input[type=checkbox]")) box.checked = false;
  renderSelection();
}

function forget(ids) {
  for (const id of ids) state.selected.delete(id);
}

// ---- actions --------------------------------------------------------------------------

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
  setStatus("Enter the token printed by `deadletter serve` to change anything.", true);
  $("token").focus();
  return false;
}

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

function report(text, r) {
  if (r.failed && r.failed.length > 0) {
    setStatus(`${text}; ${r.failed.length} refused: ${r.failed.map((f) => f.id + " " + f.reason).join("; ")}`, true);
  } else {
    setStatus(text);
  }
}

async function replayIds(ids) {
  if (!requireToken()) return;
  try {
    const r = await post("/api/replay", { dlq: state.dlq, ids, ...replayOptions() });
    const target = replayOptions().to || (queueByDlq(state.dlq) || {}).queue;
    report(`Replayed ${plural(r.replayed.length, "entry", "entries")} to ${target}`, r);
    forget(r.replayed);
    // A replayed entry has left the DLQ: its panel would only say "not found" now.
    if (state.entry !== null && r.replayed.includes(state.entry)) closeEntry();
  } catch (err) {
    setStatus("Replay failed: " + err.message, true);
  }
  await refresh();
}

// One entry back with the payload the operator edited (read at `generation`).
async function replayEdited(id, generation, payload) {
  if (!requireToken()) return;
  try {
    const r = await post("/api/replay", { dlq: state.dlq, ids: [id], payload, generation, ...replayOptions() });
    const target = replayOptions().to || (queueByDlq(state.dlq) || {}).queue;
    report(`Replayed entry ${id} with the edited payload to ${target}`, r);
    forget(r.replayed);
    if (r.replayed.includes(id)) closeEntry();
  } catch (err) {
    setStatus("Replay failed: " + err.message, true);
  }
  await refresh();
}

async function deleteIds(ids) {
  if (!requireToken()) return;
  try {
    const r = await post("/api/delete", { dlq: state.dlq, ids });
    setStatus(`Deleted ${plural(r.deleted, "entry", "entries")}`);
    forget(ids);
    if (state.entry !== null && ids.includes(state.entry)) closeEntry();
  } catch (err) {
    setStatus("Delete failed: " + err.message, true);
  }
  await refresh();
}

async function markIds(ids, success, note) {
  if (!requireToken()) return;
  try {
    const r = await post("/api/mark", { dlq: state.dlq, ids, success, note: note || undefined });
    report(`Marked ${plural(r.marked.length, "entry", "entries")} reprocessed (${success ? "ok" : "failed"})`, r);
  } catch (err) {
    setStatus("Mark failed: " + err.message, true);
  }
  await refresh();
  if (state.entry !== null && ids.includes(state.entry)) await showEntry(state.entry, { scroll: false });
}

// A destructive button asks for a second click instead of a dialog; the armed state, and
// its label, last five seconds.
function setLabel(button, label) {
  button.dataset.label = label;
  if (!button.dataset.armed) button.textContent = label;
}

function resetConfirm(button) {
  button.classList.remove("confirm");
  delete button.dataset.armed;
  if (button.dataset.label) button.textContent = button.dataset.label;
}

function armed(button, label) {
  if (button.dataset.armed) {
    resetConfirm(button);
    return true;
  }
  if (!button.dataset.label) button.dataset.label = button.textContent;
  button.dataset.armed = "1";
  button.classList.add("confirm");
  button.textContent = label;
  setTimeout(() => resetConfirm(button), 5000);
  return false;
}

function anyArmed() {
  return document.querySelector("[data-armed]") !== null;
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
  toFirstPage();
  clearSelection();
  await refresh();
}

function wireList() {
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.filter = filterFromForm();
    toFirstPage();
    writeAddress();
    loadEntries().catch((e) => setStatus(e.message, true));
  });
  $("clear-filters").addEventListener("click", () => {
    $("filters").reset();
    state.filter = {};
    toFirstPage();
    writeAddress();
    loadEntries().catch((e) => setStatus(e.message, true));
  });
  const page = (after, before) => {
    state.after = after;
    state.before = before;
    writeAddress();
    loadEntries().catch((e) => setStatus(e.message, true));
  };
  $("next-page").addEventListener("click", () => state.page && page(state.page.next_cursor, null));
  $("prev-page").addEventListener("click", () => state.page && page(null, state.page.prev_cursor));
  $("first-page").addEventListener("click", () => page(null, null));
  $("select-page").addEventListener("change", (ev) => selectPage(ev.target.checked));
  $("clear-selection").addEventListener("click", clearSelection);
  const selected = () => [...state.selected].sort((a, b) => a - b);
  $("replay-selected").addEventListener("click", () => replayIds(selected()));
  $("delete-selected").addEventListener("click", (ev) => {
    const ids = selected();
    if (armed(ev.currentTarget, `Click again to delete ${plural(ids.length, "entry", "entries")}`)) deleteIds(ids);
  });
  $("mark-selected-ok").addEventListener("click", () => markIds(selected(), true, $("mark-note").value.trim()));
  $("mark-selected-failed").addEventListener("click", () => markIds(selected(), false, $("mark-note").value.trim()));
  $("replay-matching").addEventListener("click", () => bulk("replay"));
  $("delete-matching").addEventListener("click", () => bulk("delete"));
}
