"""Issue 24: an adapter whose *returned object* raises a BaseException when posref later touches
it (SystemExit(0), KeyboardInterrupt, GeneratorExit: a tensor subclass whose __torch_function__
raises, a number whose __float__ raises, a module whose ``posref_output`` property raises) gets a
verdict for that case (error, code raised, "raised ... when used"), and the run goes on: never a
false exit 0 with no output, never "interrupted". A real Ctrl-C still stops the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

import pytest
import torch

from conformance import run_conformance
from conformance.core import registry
from conformance.isolation import RealInterrupt
from reference.golden import store

ROOT = Path(__file__).resolve().parents[2]
EXCEPTIONS = {"SystemExit": lambda: SystemExit(0), "KeyboardInterrupt": KeyboardInterrupt,
              "GeneratorExit": GeneratorExit}


def _raiser(name):
    """A tensor subclass whose every torch operation (attribute reads included) raises ``name``."""

    class Hostile(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            raise EXCEPTIONS[name]()

    return Hostile


def hostile_tensor(name="SystemExit"):
    return torch.zeros(2).as_subclass(_raiser(name))


class ExitNumber:
    """A number whose conversions raise SystemExit(0)."""

    def __float__(self):
        raise SystemExit(0)

    __int__ = __index__ = __float__


class HostileModule:
    """rope.module's factory result: callable, but its posref_output property raises."""

    @property
    def posref_output(self):
        raise SystemExit(0)

    def __call__(self, *args):
        return args[0]


def _forms(protocol: str, name: str):
    """What the generic hostile adapter returns for ``protocol``, tried in order: a hostile
    tensor, a pair of them (protocols that return a pair), a hostile module (rope.module)."""
    h = hostile_tensor(name)
    if protocol == "rope.module":
        return [HostileModule()]
    if protocol == "attention.decode":  # a layer whose every step answers the hostile tensor
        return [lambda *args: h]
    if protocol == "mrope.decode":  # a session whose prefill and decode answer it
        return [types.SimpleNamespace(prefill=lambda *args: h, decode=lambda *args: h)]
    return [h, (h, h)]


def _first_graded_case(protocol: str) -> str:
    """A committed case whose right answer is a value (not an exception)."""
    proto = registry.get(protocol)
    for case in store.iter_cases(protocol):
        if proto.expected_error(case, proto.spec(case)) is None:
            return case.id
    raise AssertionError(f"{protocol}: no case with a value to grade")


def _grade(protocol, value, **kw):
    def adapter(*args):
        return value

    return run_conformance(adapter, protocol, cases=_first_graded_case(protocol), fresh=False,
                           dtypes=("float32",), **kw)


def _raised_when_used(result) -> bool:
    return (result.verdict == "error" and [d.code for d in result.diagnoses] == ["raised"]
            and "when used" in result.diagnoses[0].message)


@pytest.mark.parametrize("protocol", registry.protocol_names())
def test_a_returned_value_that_raises_system_exit_is_a_verdict_in_every_protocol(protocol):
    seen = []
    for value in _forms(protocol, "SystemExit"):
        report = _grade(protocol, value)  # must return: SystemExit never escapes
        assert report.cases and all(c.verdict in ("error", "fail") for c in report.cases)
        assert report.summary()["overall"] != "pass"
        seen.append(_raised_when_used(report.cases[0]))
    assert any(seen), f"{protocol}: no form made the grader touch the hostile value"


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_keyboard_interrupt_and_generator_exit_from_a_returned_value_are_verdicts(name):
    report = _grade("rope.apply", hostile_tensor(name))  # its probe and identities touch it too
    case = report.cases[0]
    assert _raised_when_used(case) and name in case.diagnoses[0].message
    # the identities touch the hostile value too: each is an error, none stops the run
    assert report.identities and all(i.verdict in ("error", "skip", "fail") for i in report.identities)


def test_a_number_whose_float_raises_is_a_verdict():
    report = _grade("rope.frequencies", (torch.ones(4), ExitNumber()))
    assert _raised_when_used(report.cases[0]) and "SystemExit" in report.cases[0].diagnoses[0].message


def test_a_module_whose_posref_output_property_raises_is_a_verdict():
    report = _grade("rope.module", HostileModule())
    assert _raised_when_used(report.cases[0])


DIFFERENTIABLE = [n for n in registry.protocol_names() if getattr(registry.get(n), "differentiable", False)]


@pytest.mark.parametrize("option", [{"grad": True}, {"autocast": "bfloat16"}], ids=["grad", "autocast"])
@pytest.mark.parametrize("protocol", DIFFERENTIABLE)
def test_under_grad_and_autocast_the_run_goes_on(protocol, option):
    for value in _forms(protocol, "SystemExit"):
        report = _grade(protocol, value, **option)
        assert report.cases and all(c.verdict in ("error", "fail") for c in report.cases), protocol


def test_a_real_ctrl_c_while_posref_grades_a_value_stops_the_run():
    # The value's first use sends a real SIGINT to this process: the run-wide marker tells it
    # apart from a KeyboardInterrupt the value raises itself, and the run stops.
    main = threading.main_thread().ident

    class CtrlC(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            signal.pthread_kill(main, signal.SIGINT)
            return super().__torch_function__(func, types, args, kwargs)

    with pytest.raises(RealInterrupt):
        _grade("t5.bucket", torch.zeros(2, dtype=torch.long).as_subclass(CtrlC), identities=False)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


HOSTILE_FILE = textwrap.dedent(
    """
    import torch

    class Hostile(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            raise SystemExit(0)

    def adapter(relative_positions, spec):
        return torch.zeros(2).as_subclass(Hostile)
    """
)


@pytest.mark.skipif(os.name != "posix", reason="the supervised command is POSIX only")
def test_the_posref_command_prints_a_report_and_exits_1(tmp_path):
    # Before the fix: exit 0, empty stdout and stderr (the supervised child read SystemExit(0)
    # as its own exit code).
    (tmp_path / "hostile_sysexit.py").write_text(HOSTILE_FILE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from conformance.supervise import entry; sys.exit(entry())",
         "conform", f"{tmp_path / 'hostile_sysexit.py'}:adapter", "--protocol", "t5.bucket",
         "--cases", "t5.bucket/t5-encoder/*", "--no-fresh"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    text = proc.stdout + proc.stderr
    assert "t5.bucket/t5-encoder/" in text and "SystemExit" in text and "when used" in text


PRINTING_FILE = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {root!r})
    from examples.t5.hf_t5 import bucket

    def adapter(relative_positions, spec):
        print("NOISE from print")
        sys.stdout.flush()
        os.write(1, b"NOISE on fd 1\\n")
        return bucket(relative_positions, spec)
    """
)


@pytest.mark.skipif(os.name != "posix", reason="the supervised command is POSIX only")
def test_json_to_stdout_stays_parseable_when_the_adapter_prints(tmp_path):
    # Issue 24: in-process, what the adapter printed (print, or straight to fd 1) went to stdout
    # in the middle of `--json -`; it now goes to stderr during each call.
    import json

    (tmp_path / "printing.py").write_text(PRINTING_FILE.format(root=str(ROOT)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from conformance.supervise import entry; sys.exit(entry())",
         "conform", f"{tmp_path / 'printing.py'}:adapter", "--protocol", "t5.bucket",
         "--cases", "t5.bucket/t5-encoder/*", "--no-fresh", "--json", "-"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)  # nothing but the report on stdout
    assert report["summary"]["overall"] == "pass"
    assert "NOISE from print" in proc.stderr and "NOISE on fd 1" in proc.stderr
