"""TARGET loading: both forms work; every kind of bad target is a one-line UsageError."""

import pytest

from conformance.errors import UsageError
from conformance.loader import load_target
from support import STYLES_FILE


def test_file_target():
    fn = load_target(f"{STYLES_FILE}:hf_rotate_half")
    assert callable(fn) and fn.__name__ == "hf_rotate_half"


def test_module_target_with_dotted_name():
    fn = load_target("conformance.loader:load_target")
    assert fn is load_target
    assert load_target("conformance.errors:Unsupported.__init__")


def test_relative_file_target(monkeypatch):
    monkeypatch.chdir(STYLES_FILE.parent.parent)
    assert callable(load_target("bench/rope_styles.py:meta_complex"))


@pytest.mark.parametrize(
    "target, message",
    [
        ("no_colon_here", "TARGET must be"),
        ("pkg.mod:", "TARGET must be"),
        (":fn", "TARGET must be"),
        ("pkg.mod:not-an-identifier", "TARGET must be"),
        ("surely_not_a_module_xyz:fn", "cannot import module"),
        ("missing/file.py:fn", "no such file"),
        ("conformance.loader:no_such_name", "has no attribute"),
        ("conformance.loader:FORM", "not a callable"),
    ],
)
def test_bad_targets(target, message):
    with pytest.raises(UsageError, match=message) as info:
        load_target(target)
    assert "\n" not in str(info.value)


def test_target_that_raises_on_import(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("raise RuntimeError('boom\\nsecond line')\n")
    with pytest.raises(UsageError, match="RuntimeError: boom") as info:
        load_target(f"{bad}:fn")
    assert "\n" not in str(info.value)


def test_target_with_syntax_error(tmp_path):
    bad = tmp_path / "syntax.py"
    bad.write_text("def fn(:\n")
    with pytest.raises(UsageError, match="SyntaxError"):
        load_target(f"{bad}:fn")


def test_file_target_imports_its_neighbours(tmp_path):
    (tmp_path / "helper_mod_for_posref.py").write_text("VALUE = 3\n")
    (tmp_path / "adapter.py").write_text("from helper_mod_for_posref import VALUE\ndef fn():\n    return VALUE\n")
    assert load_target(f"{tmp_path / 'adapter.py'}:fn")() == 3


def test_target_of_round_trips():
    from conformance.loader import target_of

    fn = load_target(f"{STYLES_FILE}:gptj_every_two")
    assert target_of(fn) == f"{STYLES_FILE}:gptj_every_two"
    assert load_target(target_of(load_target)) is load_target
    assert target_of(lambda x: x) is None

    def local(x):
        return x

    assert target_of(local) is None
