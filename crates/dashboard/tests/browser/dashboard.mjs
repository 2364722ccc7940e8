// Browser test of the deadletter dashboard, driven over the W3C WebDriver protocol with
// Node's built-in fetch (no npm package): Debian's chromium + chromium-driver.
//
// Usage: node dashboard.mjs SERVE_INFO.json SCREENSHOT_DIR
//   SERVE_INFO.json: what `deadletter serve --json` printed (url, token, open).
//
// Checks: the page loads with no token in its address afterwards; the counts it shows
// equal /api/stats; replay on one entry moves it (the page's counts and /api/stats both
// change); a replay without the token is refused (403) from inside the page and from
// outside; a replay with the token from another origin is refused (403); dark mode follows
// prefers-color-scheme (emulated through the DevTools protocol) and a 420 px window does
// not overflow; pages both ways, with cursors that stay right when the entry they came
// from is replayed; filters given in the address are applied; rows selected and marked
// reprocessed or deleted (a delete asks for a second click, whose label resets); the list
// refreshes by itself and keeps the selection; a link to an entry opens it, and its payload
// edited in the panel and replayed closes it (edit-then-replay); the failure chart keeps its counts after replays and deletes; the
// fingerprints panel shows /api/fingerprints (counts, sparklines) and a click on a row
// filters the list; a guarded replay started from the filter shows its progress and is
// paused and stopped from the page; a replay by fingerprint empties that fingerprint.
// Saves screenshots. Prints "browser: N passed, 0 failed" and exits 0, or names the
// failed check and exits 1.

import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [infoPath, shotDir] = process.argv.slice(2);
if (!infoPath || !shotDir) {
  console.error("usage: node dashboard.mjs SERVE_INFO.json SCREENSHOT_DIR");
  process.exit(2);
}
const info = JSON.parse(readFileSync(infoPath, "utf8"));
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const CHROMEDRIVER = process.env.CHROMEDRIVER || "/usr/bin/chromedriver";
const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

let passed = 0;
function check(ok, what) {
  if (!ok) throw new Error("check failed: " + what);
  passed += 1;
  console.log("ok - " + what);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function wd(base, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json();
  if (!res.ok) {
    throw new Error(`WebDriver ${method} ${path}: ${res.status} ${JSON.stringify(json.value || json)}`);
  }
  return json.value;
}

async function waitFor(what, fn, timeoutMs = 20000) {
  const until = Date.now() + timeoutMs;
  let last;
  while (Date.now() < until) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await sleep(150);
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

async function apiStats() {
  const res = await fetch(info.url + "api/stats");
  return res.json();
}

async function apiGet(path) {
  const res = await fetch(info.url + path);
  return res.json();
}

async function apiPost(path, body) {
  const res = await fetch(info.url + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Deadletter-Token": info.token },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function timelineTotal(dlq) {
  const t = await apiGet(`api/timeline/${dlq}?hours=48`);
  return t.buckets.reduce((a, b) => a + b, 0) + t.earlier;
}

async function main() {
  const port = await freePort();
  const driver = spawn(CHROMEDRIVER, [`--port=${port}`, "--allowed-ips=127.0.0.1"], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const base = `http://127.0.0.1:${port}`;
  const profile = mkdtempSync(join(tmpdir(), "deadletter-chromium-"));
  let session = null;
  try {
    await waitFor("chromedriver", async () => {
      const res = await fetch(base + "/status");
      return (await res.json()).value.ready;
    });
    const caps = await wd(base, "POST", "/session", {
      capabilities: {
        alwaysMatch: {
          browserName: "chrome",
          "goog:chromeOptions": {
            binary: CHROMIUM,
            args: [
              "--headless",
              "--no-sandbox",
              "--disable-gpu",
              "--disable-quic",
              "--no-first-run",
              "--disable-background-networking",
              "--disable-component-update",
              "--disable-sync",
              "--disable-dev-shm-usage",
              "--window-size=1400,1250",
              `--user-data-dir=${profile}`,
            ],
          },
        },
      },
    });
    session = caps.sessionId;
    const s = (p) => `/session/${session}${p}`;
    const exec = (script, ...args) => wd(base, "POST", s("/execute/sync"), { script, args });
    const find = async (css) => (await wd(base, "POST", s("/element"), { using: "css selector", value: css }))[ELEMENT];
    const text = async (css) => wd(base, "GET", s(`/element/${await find(css)}/text`));
    // Clicks an element as a user would: scrolled to the middle of the window first (the
    // driver's own scrolling may leave it under the status bar fixed at the bottom).
    const click = async (css) => {
      const el = await find(css);
      await exec("arguments[0].scrollIntoView({block: 'center'});", { [ELEMENT]: el });
      return wd(base, "POST", s(`/element/${el}/click`), {});
    };
    const shot = async (name) => {
      const png = await wd(base, "GET", s("/screenshot"));
      writeFileSync(join(shotDir, name), Buffer.from(png, "base64"));
    };
    const rowIds = () =>
      exec('return [...document.querySelectorAll("#entries tbody tr[data-id]")].map(r => Number(r.dataset.id));');
    // Opens an address of the dashboard and waits for its first load.
    const open = async (query) => {
      await wd(base, "POST", s("/url"), { url: info.url + query });
      await waitFor(`the page ${query} to load`, () => exec("return document.body.dataset.loaded || null;"));
    };
    const loadedAt = () => exec("return document.body.dataset.loaded;");
    // Clicks, then waits until the page has loaded again (an action reloads what it shows).
    const clickAndReload = async (css) => {
      const before = await loadedAt();
      await click(css);
      await waitFor(`the page to reload after ${css}`, async () => (await loadedAt()) !== before);
    };

    // 1. The page loads (with the token from the address's fragment).
    await wd(base, "POST", s("/url"), { url: info.open });
    await waitFor("the page to load", () => exec("return document.body.dataset.loaded || null;"));
    const href = await exec("return location.href;");
    check(!href.includes("token"), "the token is removed from the address bar");

    // 2. The counts shown equal the API's.
    const before = await apiStats();
    check(before.queues.length >= 2, "the store has the scenario's queues");
    for (const q of before.queues) {
      const row = `[data-testid="queue-row-${q.queue}"]`;
      for (const field of ["depth", "in_flight", "enqueued", "acked", "retried", "dead_lettered", "dlq_size"]) {
        const shown = await text(`${row} [data-field="${field}"]`);
        if (shown !== String(q[field])) {
          throw new Error(`check failed: ${q.queue} ${field} shows ${shown}, API says ${q[field]}`);
        }
      }
      check(true, `queue ${q.queue}: counts shown equal /api/stats (DLQ ${q.dlq_size})`);
    }
    // 2b. The workers panel: a row per queue of /api/workers; `serve` holds the store and
    // runs no pool, so each says so.
    const workers = await apiGet("api/workers");
    check(workers.available && workers.queues.length === before.queues.length, "/api/workers lists every queue");
    for (const q of workers.queues) {
      const pools = await text(`[data-testid="workers-row-${q.queue}"] [data-field="pools"]`);
      if (pools !== "no pool attached") throw new Error(`check failed: workers of ${q.queue} show ${pools}`);
    }
    check(true, "the workers panel says no pool is attached to any queue");
    const orders = before.queues.find((q) => q.queue === "orders");
    const rows = await exec('return document.querySelectorAll("#entries tbody tr[data-id]").length;');
    check(rows === Math.min(25, orders.dlq_size), `the DLQ list shows ${rows} entries of orders-dlq`);
    const matched = await text('[data-testid="matched"]');
    check(matched === `${orders.dlq_size} matching`, `the list says "${matched}"`);
    const kinds = await exec('return document.querySelectorAll("#kind-chart rect.bar").length;');
    check(kinds === Object.keys(orders.dlq_stats.by_error_kind).length, `the error-kind chart has ${kinds} bars`);
    const bars = await exec('return document.querySelectorAll("#timeline-chart rect.bar").length;');
    check(bars > 0, `the failures-over-time chart has ${bars} bars`);

    // 3. A filter narrows the list.
    const kind = Object.keys(orders.dlq_stats.by_error_kind)[0];
    await exec(
      "const s = document.getElementById('f-kind'); s.value = arguments[0];" +
        "document.querySelector('#filters button[type=submit]').click();",
      kind,
    );
    await waitFor("the filtered list", async () => (await text('[data-testid="matched"]')) === `${orders.dlq_stats.by_error_kind[kind]} matching`);
    check(true, `filtering by ${kind} shows ${orders.dlq_stats.by_error_kind[kind]} entries`);
    await click("#clear-filters");
    await waitFor("the whole list again", async () => (await text('[data-testid="matched"]')) === `${orders.dlq_size} matching`);

    // 3b. The fingerprints panel: one row per fingerprint of /api/fingerprints, with its
    // count and a sparkline of the last day; a click on a row lists its entries.
    const fps = (await apiGet("api/fingerprints/orders-dlq")).fingerprints;
    check(fps.length >= 2, `orders-dlq has ${fps.length} fingerprints`);
    await waitFor("the fingerprints panel", () =>
      exec(`return document.querySelectorAll('#fingerprints tbody tr.clickable').length === ${fps.length};`),
    );
    for (const f of fps) {
      const row = `[data-testid="fp-row-${f.fingerprint}"]`;
      const shown = await text(`${row} [data-field="count"]`);
      if (shown !== String(f.count) || (await text(`${row} [data-field="template"]`)) !== f.template) {
        throw new Error(`check failed: fingerprint ${f.fingerprint} shows ${shown}, API says ${f.count}`);
      }
      const spark = await exec(`return document.querySelector('${row} svg.spark').dataset.total;`);
      const day = f.last_day_by_hour.reduce((a, b) => a + b, 0);
      if (spark !== String(day)) throw new Error(`check failed: ${f.fingerprint} sparkline sums ${spark}, API ${day}`);
    }
    check(true, `the fingerprints panel shows each one's template, count and last day (${fps.map((f) => f.count).join(", ")})`);
    const top = fps[0];
    await clickAndReload(`[data-testid="fp-row-${top.fingerprint}"] td`);
    await waitFor("the list filtered by fingerprint", async () => (await text('[data-testid="matched"]')) === `${top.count} matching`);
    check((await exec("return location.search;")).includes("fingerprint=" + top.fingerprint), "a click on a fingerprint filters the list by it, in the address too");
    check((await exec("return document.getElementById('filters').elements.fingerprint.value;")) === top.fingerprint, "and the form shows it");
    await click("#clear-filters");
    await waitFor("the whole list again", async () => (await text('[data-testid="matched"]')) === `${orders.dlq_size} matching`);

    // 4. Replay one entry by clicking its button.
    const id = await exec('return document.querySelector("#entries tbody tr[data-id]").dataset.id;');
    await click(`[data-testid="replay-${id}"]`);
    await waitFor("the replay to finish", async () => (await text('[data-testid="status"]')).startsWith("Replayed 1 entry"));
    const after = await apiStats();
    const ordersAfter = after.queues.find((q) => q.queue === "orders");
    check(ordersAfter.dlq_size === orders.dlq_size - 1, `orders-dlq went from ${orders.dlq_size} to ${ordersAfter.dlq_size}`);
    check(ordersAfter.depth === orders.depth + 1, `orders went from ${orders.depth} to ${ordersAfter.depth} waiting`);
    await waitFor("the page's count to follow", async () =>
      (await text('[data-testid="queue-row-orders"] [data-field="dlq_size"]')) === String(ordersAfter.dlq_size),
    );
    check(true, "the page shows the new DLQ size");
    await waitFor(`entry ${id} to leave the list`, () =>
      exec(`return document.querySelector('[data-testid="entry-row-${id}"]') === null;`),
    );
    check(true, `entry ${id} left the list`);

    // 5. A replay without the token is refused, from the page itself and from outside.
    const other = await exec('return document.querySelector("#entries tbody tr[data-id]").dataset.id;');
    const body = JSON.stringify({ dlq: "orders-dlq", ids: [Number(other)] });
    const inPage = await wd(base, "POST", s("/execute/async"), {
      script:
        "const done = arguments[arguments.length - 1];" +
        "fetch('/api/replay', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: arguments[0]})" +
        ".then(r => done(r.status), e => done(String(e)));",
      args: [body],
    });
    check(inPage === 403, `a replay from the page without the token gets ${inPage}`);
    const outside = await fetch(info.url + "api/replay", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body,
    });
    check(outside.status === 403, `a replay without the token gets ${outside.status}`);
    const crossSite = await fetch(info.url + "api/replay", {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Deadletter-Token": info.token,
        Origin: "http://attacker.example",
      },
      body,
    });
    check(crossSite.status === 403, `a replay with the token from another origin gets ${crossSite.status}`);
    const unchanged = (await apiStats()).queues.find((q) => q.queue === "orders");
    check(unchanged.dlq_size === ordersAfter.dlq_size, "the refused replays changed nothing");

    // 6. Screenshots: the overview, then one entry's envelope.
    await exec("window.scrollTo(0, 0);");
    await shot("dashboard.png");
    const binary = await exec(
      "const r = [...document.querySelectorAll('#entries tbody tr[data-id]')]" +
        ".find(r => r.querySelector('td.payload').textContent.startsWith('0x'));" +
        "return r ? r.dataset.id : null;",
    );
    await click(`[data-testid="view-${binary || other}"]`);
    await waitFor("the entry view", () => exec("return !document.getElementById('entry-section').hidden;"));
    const payload = await text('[data-testid="entry-payload"]');
    check(payload.length > 0, "the entry view shows its payload");
    await exec("document.getElementById('entry-section').scrollIntoView({block: 'start'});");
    await sleep(300);
    await shot("entry.png");
    await click("#close-entry");

    // 7. Dark mode follows the browser's preference; a 420 px window does not overflow.
    const background = () => exec("return getComputedStyle(document.body).backgroundColor;");
    const light = await background();
    await wd(base, "POST", s("/goog/cdp/execute"), {
      cmd: "Emulation.setEmulatedMedia",
      params: { features: [{ name: "prefers-color-scheme", value: "dark" }] },
    });
    const dark = await background();
    const luminance = (rgb) => rgb.match(/\d+/g).slice(0, 3).reduce((a, b) => a + Number(b), 0);
    check(luminance(light) > 600 && luminance(dark) < 150, `dark mode: background ${light} becomes ${dark}`);
    await exec("window.scrollTo(0, 0);");
    await sleep(200);
    await shot("dashboard-dark.png");
    await wd(base, "POST", s("/goog/cdp/execute"), {
      cmd: "Emulation.setEmulatedMedia",
      params: { features: [{ name: "prefers-color-scheme", value: "light" }] },
    });
    await wd(base, "POST", s("/window/rect"), { width: 420, height: 900 });
    await waitFor("a 420 px viewport", async () => (await exec("return window.innerWidth;")) <= 420);
    const overflow = await exec(
      "const h = document.querySelector('header');" +
        "return {page: document.documentElement.scrollWidth - window.innerWidth, header: h.scrollWidth - h.clientWidth, width: window.innerWidth};",
    );
    check(overflow.page <= 0 && overflow.header <= 0, `at ${overflow.width} px nothing overflows (${JSON.stringify(overflow)})`);
    await exec("window.scrollTo(0, 0);");
    await shot("dashboard-420.png");
    await wd(base, "POST", s("/window/rect"), { width: 1400, height: 1250 });

    // 8. Pages both ways, two entries a page; the cursors stay right when the entry they
    // were taken from is replayed in between.
    const chartBefore = await timelineTotal("orders-dlq");
    const all = (await apiGet("api/dlq/orders-dlq?limit=100")).entries.map((e) => e.id);
    check(all.length === 6, `orders-dlq lists ${all.length} entries`);
    await open("?dlq=orders-dlq&limit=2");
    check(JSON.stringify(await rowIds()) === JSON.stringify(all.slice(0, 2)), "page 1 shows the first two entries");
    check(await exec("return document.getElementById('prev-page').disabled;"), "page 1 has no previous page");
    await clickAndReload("#next-page");
    check(JSON.stringify(await rowIds()) === JSON.stringify(all.slice(2, 4)), "page 2 shows the next two");
    check((await exec("return location.search;")).includes("after="), "the page's cursor is in the address");
    await apiPost("api/replay", { dlq: "orders-dlq", ids: [all[3]], reset_attempts: true });
    await clickAndReload("#next-page");
    check(JSON.stringify(await rowIds()) === JSON.stringify(all.slice(4, 6)), `after ${all[3]} was replayed, page 3 starts right after it`);
    await clickAndReload("#prev-page");
    check(JSON.stringify(await rowIds()) === JSON.stringify([all[1], all[2]]), "the previous page is the two entries before");
    await clickAndReload("#prev-page");
    check(JSON.stringify(await rowIds()) === JSON.stringify([all[0]]), "and before them, the first");
    check(await exec("return document.getElementById('prev-page').disabled;"), "which has no previous page");
    const left = [all[0], all[1], all[2], all[4], all[5]];

    // 9. Filters in the address are applied, and shown in the form.
    const kindOf = Object.fromEntries((await apiGet("api/dlq/orders-dlq?limit=100")).entries.map((e) => [e.id, e.error_kind]));
    const invalid = left.filter((id) => kindOf[id] === "InvalidPayload");
    await open("?dlq=orders-dlq&error_kind=InvalidPayload&status=pending&attr.source=web");
    check(JSON.stringify(await rowIds()) === JSON.stringify(invalid), `the address's filters list ${invalid.length} InvalidPayload entries`);
    check((await text('[data-testid="matched"]')) === `${invalid.length} matching`, "and say so");
    const form = await exec(
      "const f = document.getElementById('filters').elements;" +
        "return [f.error_kind.value, f.status.value, f.attributes.value];",
    );
    check(JSON.stringify(form) === JSON.stringify(["InvalidPayload", "pending", "source=web"]), `the form shows them: ${form}`);
    await open("?dlq=orders-dlq&attr.source=nowhere");
    check((await rowIds()).length === 0, "an attribute no entry has matches nothing");
    // Payload search: a piece of one text payload finds the entries whose payload holds it.
    const textRows = (await apiGet("api/dlq/orders-dlq?limit=100")).entries.filter((e) => e.payload_is_text && e.payload_preview.length >= 6);
    if (textRows.length > 0) {
      const needle = textRows[0].payload_preview.slice(0, 6);
      const holding = textRows.filter((e) => e.payload_preview.includes(needle)).map((e) => e.id);
      await open("?dlq=orders-dlq&payload=" + encodeURIComponent(needle));
      const shown = await rowIds();
      check(holding.every((id) => shown.includes(id)) && shown.length > 0, `the payload search for ${needle} lists the entries holding it`);
      check((await exec("return document.getElementById('filters').elements.payload.value;")) === needle, "and the form shows the search");
    } else {
      check(false, "the browser test's DLQ has a text payload to search for");
    }

    // 10. Select rows: mark two reprocessed (with a note), delete two more (two clicks).
    await open("?dlq=orders-dlq");
    await click(`[data-testid="select-${left[0]}"]`);
    await click(`[data-testid="select-${left[1]}"]`);
    check((await text('[data-testid="selected-count"]')) === "2 selected", "two rows selected");
    await exec("document.getElementById('mark-note').value = arguments[0];", "fixed in the shop by hand");
    await clickAndReload('[data-testid="mark-selected-ok"]');
    for (const id of left.slice(0, 2)) {
      const st = await text(`[data-testid="entry-row-${id}"] [data-field="status"]`);
      check(st === "reprocessed ok", `entry ${id} shows "${st}"`);
    }
    await click("#clear-selection");
    await click(`[data-testid="select-${left[2]}"]`);
    await click(`[data-testid="select-${left[3]}"]`);
    await click('[data-testid="delete-selected"]');
    check((await text('[data-testid="delete-selected"]')) === "Click again to delete 2 entries", "delete asks for a second click");
    check((await apiStats()).queues.find((q) => q.queue === "orders").dlq_size === 5, "nothing deleted yet");
    await clickAndReload('[data-testid="delete-selected"]');
    check(JSON.stringify(await rowIds()) === JSON.stringify([left[0], left[1], left[4]]), "the two selected entries are deleted");
    check((await text('[data-testid="selected-count"]')) === "0 selected", "and no longer selected");
    // A single delete asks too, and an armed button's label resets when it expires.
    await click(`[data-testid="delete-${left[4]}"]`);
    check((await text(`[data-testid="delete-${left[4]}"]`)).startsWith("Click again"), "a single delete asks for a second click");
    await click('[data-testid="delete-matching"]');
    check((await text('[data-testid="delete-matching"]')) === "Click again to delete every matching entry", "so does delete all matching");
    await waitFor("the armed labels to reset", async () =>
      (await text('[data-testid="delete-matching"]')) === "Delete all matching (3)" &&
      (await text(`[data-testid="delete-${left[4]}"]`)) === "Delete",
    8000);
    check(true, "both labels reset after five seconds");
    check((await apiStats()).queues.find((q) => q.queue === "orders").dlq_size === 3, "nothing was deleted by single clicks");

    // 11. The list refreshes by itself and keeps the selection.
    await click(`[data-testid="select-${left[0]}"]`);
    await apiPost("api/delete", { dlq: "orders-dlq", ids: [left[1]] });
    const refreshedBefore = await exec("return document.body.dataset.refreshed || '';");
    await waitFor("an automatic refresh", async () => (await exec("return document.body.dataset.refreshed || '';")) !== refreshedBefore, 25000);
    check(JSON.stringify(await rowIds()) === JSON.stringify([left[0], left[4]]), "the list refreshed by itself");
    check(await exec(`return document.querySelector('[data-testid="select-${left[0]}"]').checked;`), "the selection was kept");

    // 12. A link to an entry opens it; its payload edited in the panel goes back edited,
    // which closes the panel.
    const link = await exec(`return document.querySelector('[data-testid="link-${left[4]}"]').getAttribute('href');`);
    check(link.includes(`entry=${left[4]}`), `the row links to ${link}`);
    await wd(base, "POST", s("/url"), { url: new URL(link, info.url).href });
    await waitFor("the linked entry", () => exec("return !document.getElementById('entry-section').hidden;"));
    check((await text("#entry-id")).startsWith(`${left[4]} in orders-dlq`), `the link opens entry ${left[4]}`);
    check(await exec("return document.getElementById('entry-edit').hidden;"), "the payload editor starts closed");
    await click('[data-testid="entry-edit"]');
    check(!(await exec("return document.getElementById('entry-edit').hidden;")), "the payload opens for editing");
    const edited = await exec(
      "const t = document.getElementById('entry-payload-edit'); t.value = t.value.replace('ORD-', 'ORD-FIXED-'); return t.value;",
    );
    check(edited.includes("ORD-FIXED-"), `the payload is edited to ${edited}`);
    await click('[data-testid="entry-replay-edited"]');
    await waitFor("the edited replay", async () =>
      (await text('[data-testid="status"]')).startsWith(`Replayed entry ${left[4]} with the edited payload`),
    );
    check(await exec("return document.getElementById('entry-section').hidden;"), "the replayed entry's panel closed");
    check(!(await exec("return location.search;")).includes("entry="), "and left the address");

    // 13. The failure chart counts dead-letterings, not what is left in the DLQ.
    const chartAfter = await timelineTotal("orders-dlq");
    check(chartAfter === chartBefore, `the failure chart still counts ${chartAfter} after replays and deletes`);

    // 14. A guarded replay of what the filter matches (the one entry left, reprocessed:
    // "include reprocessed" on): its canary goes out, nobody consumes it, so it waits; the
    // page shows its progress, pauses it and stops it.
    await open("?dlq=orders-dlq");
    await exec("document.getElementById('force').checked = true; document.getElementById('g-canary').value = '1';");
    await clickAndReload('[data-testid="guarded-matching"]');
    await waitFor("the guarded replay's status line", async () => (await text('[data-testid="status"]')).startsWith("Guarded replay"));
    const guarded = (await apiGet("api/guarded")).replays;
    check(guarded.length === 1 && guarded[0].state === "running" && guarded[0].replayed === 1, `the guarded replay started: ${JSON.stringify(guarded[0])}`);
    const gid = guarded[0].id;
    const grow = `[data-testid="guarded-row-${gid}"]`;
    await waitFor("the guarded replays table", () => exec(`return document.querySelector('${grow}') !== null && !document.getElementById('guarded-section').hidden;`));
    check((await text(`${grow} [data-field="waiting"]`)) === "1", "the page shows its canary waiting for an outcome");
    check((await text(`${grow} [data-field="state"]`)) === "running", "and the replay running");
    // Nothing consumes orders (`serve` holds the store, and runs no pool): the row says so.
    const hint = await text(`[data-testid="g-consumer-${gid}"]`);
    check(hint.startsWith("no worker pool is attached to orders") && hint.includes("WorkerPool"), `the replay says nothing consumes its target: ${hint}`);
    await exec("window.scrollTo(0, document.getElementById('guarded-section').offsetTop);");
    await shot("guarded.png");
    await clickAndReload(`[data-testid="g-pause-${gid}"]`);
    await waitFor("paused", async () => (await text(`${grow} [data-field="state"]`)) === "paused");
    check((await apiGet("api/guarded")).replays[0].state === "paused", "Pause pauses it");
    await clickAndReload(`[data-testid="g-cancel-${gid}"]`);
    await waitFor("cancelled", async () => (await text(`${grow} [data-field="state"]`)) === "cancelled");
    check((await apiGet("api/guarded")).replays[0].state === "cancelled", "Stop cancels it");

    // 15. Replay by fingerprint from the panel (two clicks): every entry with it leaves.
    await open("?dlq=emails-dlq");
    const mails = (await apiGet("api/fingerprints/emails-dlq")).fingerprints;
    check(mails.length >= 1, `emails-dlq has ${mails.length} fingerprint(s)`);
    const emailsBefore = (await apiStats()).queues.find((q) => q.queue === "emails").dlq_size;
    await click(`[data-testid="fp-replay-${mails[0].fingerprint}"]`);
    check((await text(`[data-testid="fp-replay-${mails[0].fingerprint}"]`)).startsWith("Click again"), "replay by fingerprint asks for a second click");
    await clickAndReload(`[data-testid="fp-replay-${mails[0].fingerprint}"]`);
    const emailsAfter = (await apiStats()).queues.find((q) => q.queue === "emails").dlq_size;
    check(emailsAfter === emailsBefore - mails[0].count, `replay by fingerprint: emails-dlq went from ${emailsBefore} to ${emailsAfter}`);
    console.log(`screenshots in ${shotDir}: dashboard.png, dashboard-dark.png, dashboard-420.png, entry.png, guarded.png`);
  } catch (e) {
    if (session) {
      try {
        const png = await wd(base, "GET", `/session/${session}/screenshot`);
        writeFileSync(join(shotDir, "failure.png"), Buffer.from(png, "base64"));
        console.error(`screenshot of the failure: ${join(shotDir, "failure.png")}`);
      } catch (_) {
        // The browser may be gone.
      }
    }
    throw e;
  } finally {
    if (session) await wd(base, "DELETE", `/session/${session}`).catch(() => {});
    driver.kill();
    rmSync(profile, { recursive: true, force: true });
  }
}

mkdirSync(shotDir, { recursive: true });
const watchdog = setTimeout(() => {
  console.error("browser test: gave up after 240 s");
  process.exit(1);
}, 240000);
main().then(
  () => {
    clearTimeout(watchdog);
    console.log(`browser: ${passed} passed, 0 failed`);
  },
  (e) => {
    clearTimeout(watchdog);
    console.error(e.message);
    console.log(`browser: ${passed} passed, 1 failed`);
    process.exit(1);
  },
);
