"""The Go module's copies of the protocol's names and script are the protocol's own.

``go/ctrlscope/vocabulary.go`` is generated from ``controllers/schema.py`` (``tests/protocol/go_vocabulary.py``)
and ``go/ctrlscope/frame.lua`` is ``protocol/frame.lua`` (go:embed cannot reach outside the module).
Either drifting would let one language speak a different protocol than the other.
"""

from __future__ import annotations

from pathlib import Path

from tests.protocol.go_vocabulary import TARGET, render

ROOT = Path(__file__).resolve().parents[2]


def test_go_vocabulary_is_generated_from_schema():
    assert TARGET.read_text() == render(), (
        "go/ctrlscope/vocabulary.go is stale: run `python -m tests.protocol.go_vocabulary --write`")


def test_go_frame_script_is_the_protocols():
    assert (ROOT / "go" / "ctrlscope" / "frame.lua").read_bytes() == (ROOT / "protocol" / "frame.lua").read_bytes()


def test_go_vocabulary_has_every_member():
    from controllers.schema import VOCABULARY

    text = TARGET.read_text()
    for name, enum in VOCABULARY.items():
        for m in enum:
            assert f'{name} = "{m.value}"' in text, (name, m)
