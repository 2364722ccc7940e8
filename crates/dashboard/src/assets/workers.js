// deadletter dashboard: the workers panel (loaded after guarded.js, before app.js): the
// worker pools attached to each queue (workers, handlers running, started, last heartbeat)
// and the queue's rates per second over the last minute and the last five, from
// /api/workers, polled with the rest of the page. A queue nothing consumes says so.
"use strict";

// "12.5 / 3.1": a rate over the last minute and over the last five, per second.
function fmtRates(rates, field) {
  if (!rates) return "–";
  const one = (w) => w.per_second[field].toFixed(1);
  return `${one(rates.last_minute)} / ${one(rates.last_5_minutes)}`;
}

function poolText(p) {
  const name = p.name || `#${p.id}`;
  const where = p.host ? `pid ${p.pid} on ${p.host}` : `pid ${p.pid}`;
  return `${name} (${p.kind === "Async" ? "async" : "threads"}, ${where})`;
}

async function loadWorkers() {
  const w = await api("/api/workers");
  const note = $("workers-note");
  note.hidden = w.available;
  note.textContent = w.available ? "" : "Worker pools cannot be seen: " + w.reason;
  const body = $("workers").querySelector("tbody");
  body.replaceChildren();
  for (const q of w.queues) {
    const pools = q.pools;
    const sum = (field) => pools.reduce((n, p) => n + p[field], 0);
    const oldest = (field) =>
      pools.length ? Math.max(...pools.map((p) => w.at_ms - p[field])) : null;
    const poolsCell = pools.length
      ? el("td", { "data-field": "pools", text: pools.map(poolText).join(", ") })
      : el("td", { "data-field": "pools", class: "bad", text: "no pool attached" });
    const failed = q.rates ? q.rates.last_minute.per_second.failed : 0;
    body.append(
      el(
        "tr",
        { "data-testid": "workers-row-" + q.queue },
        el("td", { "data-field": "queue", text: q.queue }),
        poolsCell,
        el("td", { class: "num", "data-field": "workers", text: String(sum("workers")) }),
        el("td", { class: "num", "data-field": "in_flight", text: String(sum("in_flight")) }),
        el("td", { "data-field": "started", text: pools.length ? fmtAge(oldest("started_at_ms")) + " ago" : "–" }),
        el("td", { "data-field": "heartbeat", text: pools.length ? fmtAge(oldest("last_heartbeat_ms")) + " ago" : "–" }),
        el("td", { class: "num", "data-field": "enqueued_rate", text: fmtRates(q.rates, "enqueued") }),
        el("td", { class: "num", "data-field": "acked_rate", text: fmtRates(q.rates, "acked") }),
        el("td", { class: "num" + (failed > 0 ? " bad" : ""), "data-field": "failed_rate", text: fmtRates(q.rates, "failed") }),
      ),
    );
  }
  document.body.dataset.workers = String(Date.now());
}
