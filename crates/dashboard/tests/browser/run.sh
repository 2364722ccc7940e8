#!/usr/bin/env bash
# The dashboard's browser test (see dashboard.mjs): fills a store with the fill_dlq
# scenario, starts `deadletter serve` on a free port, drives headless chromium through
# chromedriver, then checks with the CLI, once the server is stopped, that the replay
# clicked in the browser reached the store. Screenshots go to target/browser/; with
# UPDATE_DOCS_SCREENSHOT=1 the overview (light, dark, 420 px wide) is also copied to docs/.
#
# Needs chromium, chromium-driver and node: install.sh beside this script installs them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."   # the workspace root

for tool in node chromium chromedriver; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "browser test: $tool is missing; run $here/install.sh" >&2
    exit 1
  fi
done

# The `deadletter` command (package deadletter-cli) and the fill_dlq example (package
# deadletter-examples), built as the README's test command builds them, so CI reuses them.
cargo build --quiet --workspace --all-features --bin deadletter --example fill_dlq
target_dir=$(cargo metadata --format-version 1 --no-deps |
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).target_directory));')
bin="$target_dir/debug/deadletter"

work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$target_dir/debug/examples/fill_dlq" "$work/store"
"$bin" serve "$work/store" --bind 127.0.0.1:0 --json >"$work/serve.json" 2>"$work/serve.log" &
server=$!
for _ in $(seq 1 100); do
  [ -s "$work/serve.json" ] && break
  sleep 0.1
done
if [ ! -s "$work/serve.json" ]; then
  echo "browser test: deadletter serve did not start" >&2
  cat "$work/serve.log" >&2
  exit 1
fi

node "$here/dashboard.mjs" "$work/serve.json" "$target_dir/browser"

kill "$server"
wait "$server" 2>/dev/null || true
server=""
echo "== the dashboard's log of changes"
cat "$work/serve.log"
grep -q "POST /api/replay from .*replayed 1 of 1" "$work/serve.log"
grep -q "POST /api/replay from .*replayed 1 of 1 .* with an edited payload" "$work/serve.log"
grep -q "refused POST /api/replay .*X-Deadletter-Token" "$work/serve.log"
grep -q "refused POST /api/replay .*cross-site request refused" "$work/serve.log"
grep -q "POST /api/mark from .*marked 2 of 2 .*reprocessed ok.*fixed in the shop by hand" "$work/serve.log"
grep -q "POST /api/delete from .*deleted 2 (ids" "$work/serve.log"

grep -q "POST /api/guarded/start from .*started guarded replay 1 of 1" "$work/serve.log"
grep -q "POST /api/guarded/step from .*cancel guarded replay 1" "$work/serve.log"

# With the server stopped, the tool sees the store changed: orders-dlq 7 -> 0 (three
# replays, four deletes, two marked and later deleted, the last one replayed by the guarded
# replay), orders 0 -> 4 (the replays); the guarded replay is cancelled.
"$bin" stats "$work/store" --json | node -e '
  let s = "";
  process.stdin.on("data", (d) => (s += d)).on("end", () => {
    const q = JSON.parse(s).queues.find((q) => q.queue === "orders");
    if (q.dlq_size !== 0 || q.depth !== 4) {
      console.error(`after the browser test the CLI sees orders-dlq ${q.dlq_size}, orders ${q.depth}; expected 0 and 4`);
      process.exit(1);
    }
    console.log(`deadletter stats after the browser test: orders-dlq ${q.dlq_size}, orders ${q.depth} waiting`);
  });'
"$bin" replay "$work/store" --progress --json | node -e '
  let s = "";
  process.stdin.on("data", (d) => (s += d)).on("end", () => {
    const r = JSON.parse(s).guarded_replays;
    if (r.length !== 1 || r[0].state !== "cancelled" || r[0].replayed !== 1) {
      console.error(`after the browser test the CLI sees guarded replays ${JSON.stringify(r)}`);
      process.exit(1);
    }
    console.log("deadletter replay --progress after the browser test: 1 cancelled, 1 replayed");
  });'

if [ "${UPDATE_DOCS_SCREENSHOT:-}" = 1 ]; then
  for shot in dashboard.png dashboard-dark.png dashboard-420.png; do
    cp "$target_dir/browser/$shot" "docs/$shot"
  done
  echo "updated docs/dashboard.png, docs/dashboard-dark.png, docs/dashboard-420.png"
fi
