"""examples/newsletter.py (seed 000) runs and ends as the Rust example does: three invalid
addresses in the DLQ, Charlie corrected and replayed, Eve and Grace marked failed."""

import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "newsletter.py"


def test_the_newsletter_example(tmp_path):
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "sent: 4 |" in out and "| to the DLQ: 3" in out
    assert "  InvalidEmail: 3" in out
    assert "replay ok: charlie@email.com (corrected and redelivered through the queue)" in out
    assert "replay failed: '' -- invalid e-mail address ''" in out
    assert "replay failed: 'bad@.com' -- invalid e-mail domain '.com'" in out
    assert out.rstrip().endswith(
        "in DLQ: 2 | pending: 0 | reprocessed ok: 1 | reprocessed failed: 2 | replayed: 1"
    )
    # A second run on the same directory starts from an empty store again.
    again = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path / "store")],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert again.rstrip().endswith("replayed: 1")
