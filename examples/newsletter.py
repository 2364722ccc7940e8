"""The newsletter scenario (seed 000) in Python, on deadletter: seven subscribers, three
with invalid addresses, and a 10% chance that a send times out. Invalid addresses are
permanent failures and go to the DLQ at once; timeouts are retried with backoff. Then the
DLQ is inspected, support corrects one address and replays it through the queue, and the
remaining entries are handled by hand with a fixed validator and marked reprocessed, as
the original blog post does. The same run as `cargo run --release --example newsletter`.

Run: python examples/newsletter.py [STORE_DIR]   (after `pip install ./crates/python`)
"""

import os
import random
import shutil
import sys
import tempfile

import deadletter

SUBSCRIBERS = [
    {"email": "alice@email.com", "name": "Alice", "plan": "premium"},
    {"email": "bob@email.com", "name": "Bob", "plan": "free"},
    {"email": "INVALID_EMAIL", "name": "Charlie", "plan": "free"},
    {"email": "diana@email.com", "name": "Diana", "plan": "premium"},
    {"email": "", "name": "Eve", "plan": "free"},
    {"email": "frank@email.com", "name": "Frank", "plan": "business"},
    {"email": "bad@.com", "name": "Grace", "plan": "free"},
]


class InvalidEmail(deadletter.Permanent):
    """An address that can never be delivered to: straight to the DLQ."""


def validate(email):
    """A strict address check: something before '@', a domain with a dot that neither
    starts nor ends the domain."""
    local, at, domain = email.partition("@")
    if not at:
        raise InvalidEmail(f"invalid e-mail address '{email}'")
    if not local or "." not in domain or domain.startswith(".") or domain.endswith("."):
        raise InvalidEmail(f"invalid e-mail domain '{domain}'")


def send_newsletter(msg):
    s = msg.json()
    try:
        validate(s["email"])
    except InvalidEmail as e:
        print(f"  x {s['name']} <{s['email']}>: {e}")
        raise
    if random.random() < 0.1:
        print(f"  ~ {s['name']} <{s['email']}>: timeout on attempt {msg.attempt}, will retry")
        raise TimeoutError(f"timeout sending to {s['email']}")
    print(f"  > sent to {s['email']} ({s['name']}, attempt {msg.attempt})")


def fresh_store_dir(path):
    """Removes the store an earlier run left in `path`; refuses a directory that holds
    files but no store (a mistyped path must not cost anyone data)."""
    if not os.path.isdir(path) or not os.listdir(path):
        return
    if not any(name.endswith(".seg") for name in os.listdir(path)):
        sys.exit(f"{path} is not empty and holds no deadletter store: give an empty or new directory")
    shutil.rmtree(path)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.gettempdir(), "deadletter-example-newsletter-py")
    fresh_store_dir(path)
    with deadletter.Store(path) as store:
        queue = store.queue("newsletter")
        for s in SUBSCRIBERS:
            queue.enqueue(s, codec="json")

        print("=== sending the newsletter batch (2 workers, 5 attempts, exponential backoff) ===\n")
        with deadletter.WorkerPool(queue, send_newsletter, workers=2, max_attempts=5, delay=0.05, name="mailer") as pool:
            pool.run_until_idle()
        c = pool.counters
        print(f"\nsent: {c['processed']} | retried: {c['retried']} | to the DLQ: {c['dead_lettered']}")

        dlq = queue.dlq
        stats = dlq.stats()
        print(f"\nDLQ statistics ({stats['name']}):")
        print(f"  total: {stats['total']} | pending: {stats['pending']}")
        for kind, n in stats["by_error_kind"].items():
            print(f"  {kind}: {n}")
        print("\nmessages in quarantine:")
        entries = dlq.list()
        for e in entries:
            s = e.json()
            print(f"  id {e.id} | {s['name']} <{s['email']}> | {e.error_kind}: {e.error_message}")

        print("\n=== replay after the fix ===")
        for e in entries:
            s = e.json()
            if s["name"] == "Charlie":
                # Support found Charlie's real address: replay the message with corrected data.
                s["email"] = "charlie@email.com"
                dlq.replay_corrected(e.id, s, codec="json", reset_attempts=True)
                [msg] = queue.lease_wait(1, timeout=1.0)
                validate(msg.json()["email"])
                queue.ack(msg)
                print(f"  replay ok: {msg.json()['email']} (corrected and redelivered through the queue)")
                continue
            # The others are retried by hand with the fixed validator, as in the original post.
            try:
                validate(s["email"])
            except InvalidEmail as err:
                dlq.mark_reprocessed(e.id, False)
                print(f"  replay failed: '{s['email']}' -- {err}")
            else:
                dlq.mark_reprocessed(e.id, True)
                print(f"  replay ok: {s['email']}")

        stats = dlq.stats()
        print("\nfinal statistics:")
        print(
            f"  in DLQ: {stats['total']} | pending: {stats['pending']} | reprocessed ok: {stats['reprocessed_ok']}"
            f" | reprocessed failed: {stats['reprocessed_failed']} | replayed: {stats['replayed']}"
        )


if __name__ == "__main__":
    main()
