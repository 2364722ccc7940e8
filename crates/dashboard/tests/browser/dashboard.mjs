// Browser test of the deadletter dashboard, driven over the W3C WebDriver protocol with
// Node's built-in fetch (no npm package): Debian's chromium + chromium-driver.
//
// Usage: node dashboard.mjs SERVE_INFO.json SCREENSHOT_DIR
//   SERVE_INFO.json: what `deadletter serve --json` printed (url, token, open).
//
// Checks: the page loads with no token in its address afterwards; the counts it shows
// equal /api/stats; replay on one entry moves it (the page's counts and /api/stats both
// change); a replay without the token is refused (403) from inside the page and from
// outside; a replay with the token from another origin is refused (403). Saves
// screenshots. Prints "browser: N passed, 0 failed" and exits 0, or names the failed
// check and exits 1.

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
    const click = async (css) => wd(base, "POST", s(`/element/${await find(css)}/click`), {});
    const shot = async (name) => {
      const png = await wd(base, "GET", s("/screenshot"));
      writeFileSync(join(shotDir, name), Buffer.from(png, "base64"));
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
    console.log(`screenshots: ${join(shotDir, "dashboard.png")}, ${join(shotDir, "entry.png")}`);
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
  console.error("browser test: gave up after 120 s");
  process.exit(1);
}, 120000);
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
