"""Every checked-in transpiled module is what castpile writes now (`make generated` rewrites them)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_checked_in_transpiled_modules_are_current():
    spec = importlib.util.spec_from_file_location("regenerate", ROOT / "scripts" / "regenerate.py")
    regenerate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regenerate)
    assert len(regenerate.GENERATED) >= 4
    assert regenerate.stale() == []
