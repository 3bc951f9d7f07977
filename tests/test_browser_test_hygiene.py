"""Rules the browser tests must keep to pass under the dashboard's Content-Security-Policy.

Playwright's ``wait_for_function`` runs its first check through the DevTools protocol, which the
page's CSP does not govern, but when that check is falsy it polls inside the page, and a predicate
given as a bare expression is then compiled with ``eval`` -- which ``script-src 'self'`` forbids.
So a bare expression passes whenever the condition already holds at the first check and fails with
an EvalError when it does not (a loaded machine: seen once in 20 loops of
``bench/browser_loop.py``). A function (``"() => ..."``) is compiled by the protocol and polls fine.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# The browser tests, and the benchmarks that drive the dashboard in Chromium the same way.
SOURCES = (TESTS, TESTS.parent / "bench")


def _first_string(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def test_every_wait_for_function_predicate_is_a_function_not_an_expression() -> None:
    offenders = []
    for path in sorted(p for root in SOURCES for p in root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "wait_for_function" and node.args):
                text = _first_string(node.args[0])
                if text is not None and "=>" not in text.split("\n", 1)[0] and not text.lstrip().startswith("function"):
                    offenders.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}: {text.strip()[:60]}")
    assert not offenders, "pass a function (\"() => ...\"), not an expression:\n" + "\n".join(offenders)
