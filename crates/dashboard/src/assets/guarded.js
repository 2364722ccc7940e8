// deadletter dashboard, failure fingerprints and guarded replays. Loaded after list.js and
// before app.js, whose helpers (state, el, svg, api, post, setStatus, fmtTime) it uses when
// the page runs.
//
// Fingerprints: one row per failure fingerprint of the DLQ shown (its template, kind,
// count, first and last seen, a sparkline of the last 24 hours, an example entry); a click
// on a row filters the list by it; its buttons replay or delete every entry with it.
// Guarded replays: started from the list's filter or selection with the numbers of the
// guarded bar; the table shows every replay of the store, polled while one is active,
// with pause, resume and stop.
"use strict";

const GUARDED_POLL_MS = 1500;
let guardedTimer = null;

// ---- fingerprints ---------------------------------------------------------------------

// A sparkline of 24 hourly counts, oldest hour on the left (the API gives the last hour
// first).
function sparkline(byHour) {
  const counts = byHour.slice().reverse();
  const width = 96;
  const height = 20;
  const max = Math.max(1, ...counts);
  const slot = width / counts.length;
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    class: "spark",
    role: "img",
    "aria-label": "entries per hour, last 24 hours",
  });
  counts.forEach((n, i) => {
    if (n === 0) return;
    const h = Math.max(1, ((height - 2) * n) / max);
    const bar = svg("rect", { x: i * slot + 0.5, y: height - h, width: Math.max(1, slot - 1), height: h, class: "bar" });
    bar.append(svg("title", {}, `${24 - i} h ago: ${n}`));
    chart.append(bar);
  });
  chart.dataset.total = String(counts.reduce((a, b) => a + b, 0));
  return chart;
}

function filterByFingerprint(fp) {
  state.filter = { fingerprint: fp };
  toFirstPage();
  writeAddress();
  fillForm();
  loadEntries().catch((e) => setStatus(e.message, true));
  $("entries").scrollIntoView({ behavior: "smooth", block: "start" });
}

async function byFingerprint(action, fp, button) {
  if (!requireToken()) return;
  if (!armed(button, `Click again to ${action} every entry of ${fp}`)) return;
  try {
    if (action === "replay") {
      const r = await post("/api/replay", { dlq: state.dlq, filter: { fingerprint: fp }, ...replayOptions() });
      report(`Replayed ${plural(r.replayed.length, "entry", "entries")} of fingerprint ${fp}`, r);
      forget(r.replayed);
    } else {
      const r = await post("/api/delete", { dlq: state.dlq, filter: { fingerprint: fp } });
      setStatus(`Deleted ${plural(r.deleted, "entry", "entries")} of fingerprint ${fp}`);
      closeEntry();
    }
  } catch (err) {
    setStatus(`${action} by fingerprint failed: ${err.message}`, true);
  }
  toFirstPage();
  await refresh();
}

async function loadFingerprints() {
  const body = $("fingerprints").querySelector("tbody");
  if (!state.dlq) {
    body.replaceChildren();
    return;
  }
  const r = await api(`/api/fingerprints/${encodeURIComponent(state.dlq)}`);
  body.replaceChildren();
  if (r.fingerprints.length === 0) {
    body.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "no entries in " + state.dlq })));
  }
  for (const f of r.fingerprints) {
    const picked = state.filter.fingerprint === f.fingerprint;
    const stop = (ev) => ev.stopPropagation();
    body.append(
      el(
        "tr",
        {
          class: "clickable" + (picked ? " selected" : ""),
          "data-testid": "fp-row-" + f.fingerprint,
          title: "List the entries of fingerprint " + f.fingerprint,
          onclick: () => filterByFingerprint(f.fingerprint),
        },
        el("td", { class: "msg", "data-field": "template", title: f.template, text: f.template }),
        el("td", { "data-field": "kind", text: f.error_kind }),
        el("td", { class: "num", "data-field": "count", text: String(f.count) }),
        el("td", { text: fmtTime(f.first_seen_ms) }),
        el("td", { text: fmtTime(f.last_seen_ms) }),
        el("td", { "data-field": "spark" }, sparkline(f.last_day_by_hour)),
        el("td", { class: "num", onclick: stop }, entryLink(f.example_id)),
        el(
          "td",
          { class: "actions", onclick: stop },
          el("button", {
            type: "button",
            text: "Replay all",
            "data-testid": "fp-replay-" + f.fingerprint,
            onclick: (ev) => byFingerprint("replay", f.fingerprint, ev.currentTarget),
          }),
          " ",
          el("button", {
            type: "button",
            class: "danger",
            text: "Delete all",
            "data-testid": "fp-delete-" + f.fingerprint,
            onclick: (ev) => byFingerprint("delete", f.fingerprint, ev.currentTarget),
          }),
        ),
      ),
    );
  }
}

// ---- guarded replays ------------------------------------------------------------------

function guardedOptions() {
  const num = (id) => {
    const v = $(id).value.trim();
    return v === "" ? undefined : Number(v);
  };
  const ratio = num("g-ratio");
  return {
    canary: num("g-canary"),
    growth: num("g-growth"),
    max_failure_ratio: ratio === undefined ? undefined : ratio / 100,
    rate: num("g-rate"),
    ...replayOptions(),
  };
}

async function startGuarded(which) {
  if (!requireToken()) return;
  const selection =
    which === "selected" ? { ids: [...state.selected].sort((a, b) => a - b) } : { filter: state.filter };
  try {
    const r = await post("/api/guarded/start", { dlq: state.dlq, ...selection, ...guardedOptions() });
    setStatus(`Guarded replay ${r.id} started: ${r.replayed} of ${r.selected} released (the canary)`);
    if (which === "selected") clearSelection();
  } catch (err) {
    setStatus("Guarded replay failed: " + err.message, true);
  }
  await refresh();
}

async function guardedStep(id, step) {
  if (!requireToken()) return;
  try {
    const r = await post("/api/guarded/step", { id, step });
    setStatus(`Guarded replay ${r.id}: ${r.state_text}`);
  } catch (err) {
    setStatus(`Guarded replay ${id}: ${err.message}`, true);
  }
  await refresh();
}

function progressBar(r) {
  const done = r.selected === 0 ? 1 : (r.replayed + r.skipped) / r.selected;
  const bar = el("div", { class: "progress", title: `${r.replayed} replayed, ${r.skipped} skipped, ${r.left} left of ${r.selected}` });
  const ok = r.replayed === 0 ? 0 : r.succeeded / r.selected;
  const bad = r.replayed === 0 ? 0 : r.failed_again / r.selected;
  bar.append(
    el("span", { class: "ok", style: `width:${(ok * 100).toFixed(1)}%` }),
    el("span", { class: "bad", style: `width:${(bad * 100).toFixed(1)}%` }),
    el("span", { class: "out", style: `width:${Math.max(0, (done - ok - bad) * 100).toFixed(1)}%` }),
  );
  return el("div", { class: "progress-cell" }, bar, el("span", { class: "muted", text: ` ${r.replayed}/${r.selected}` }));
}

async function loadGuarded() {
  const g = await api("/api/guarded");
  $("guarded-bar").hidden = !g.available;
  $("guarded-section").hidden = !g.available || g.replays.length === 0;
  const body = $("guarded").querySelector("tbody");
  body.replaceChildren();
  const newestFirst = g.replays.slice().reverse();
  for (const r of newestFirst) {
    const buttons = [];
    const button = (text, step, cls) =>
      el("button", {
        type: "button",
        class: cls || null,
        text,
        "data-testid": `g-${step}-${r.id}`,
        onclick: () => guardedStep(r.id, step),
      });
    if (r.state === "running") buttons.push(button("Pause", "pause"));
    if (r.state === "paused") buttons.push(button("Resume", "resume"));
    if (r.active) buttons.push(" ", button("Stop", "cancel", "danger"));
    body.append(
      el(
        "tr",
        { "data-testid": "guarded-row-" + r.id, "data-state": r.state },
        el("td", { class: "num", text: String(r.id) }),
        el("td", { text: r.dlq }),
        el("td", { class: "msg", title: r.selection, text: r.selection }),
        el("td", { "data-field": "state", class: "state-" + r.state, text: r.state_text }),
        el("td", { "data-field": "progress" }, progressBar(r)),
        el("td", { class: "num", "data-field": "succeeded", text: String(r.succeeded) }),
        el("td", { class: "num" + (r.failed_again > 0 ? " bad" : ""), "data-field": "failed_again", text: String(r.failed_again) }),
        el("td", { class: "num", "data-field": "waiting", text: String(r.waiting) }),
        el("td", { class: "num", "data-field": "left", text: String(r.left) }),
        el("td", {
          class: "num",
          title: `canary ${r.canary}, ×${r.growth} per wave, stops above ${Math.round(r.max_failure_ratio * 100)}% failed again` +
            (r.rate_per_sec ? `, ${r.rate_per_sec}/s at most` : ""),
          text: `${r.wave} (${r.wave_released}/${r.wave_size})`,
        }),
        el("td", { text: fmtTime(r.started_at_ms) }),
        el("td", { class: "actions" }, ...buttons),
      ),
    );
    // A running replay whose target nothing consumes waits for ever: say so, and how.
    if (r.consumer && r.consumer.hint) {
      body.append(
        el(
          "tr",
          { class: "hint-row" },
          el("td", {}),
          el("td", { colspan: "11", class: "hint bad", "data-testid": "g-consumer-" + r.id, text: r.consumer.hint }),
        ),
      );
    }
  }
  // While one is active, its progress is polled more often than the page refreshes.
  const active = g.replays.some((r) => r.active);
  if (active && guardedTimer === null) {
    guardedTimer = setInterval(() => {
      if (document.visibilityState === "visible" && !anyArmed()) {
        loadGuarded().catch((e) => setStatus(e.message, true));
      }
    }, GUARDED_POLL_MS);
  } else if (!active && guardedTimer !== null) {
    clearInterval(guardedTimer);
    guardedTimer = null;
    // The last wave's outcomes changed the DLQ too.
    refresh();
  }
  document.body.dataset.guarded = String(Date.now());
}

function wireGuarded() {
  $("guarded-matching").addEventListener("click", () => startGuarded("matching"));
  $("guarded-selected").addEventListener("click", () => startGuarded("selected"));
}
