"""``--junit FILE``: JUnit XML for CI systems (GitHub, GitLab, Jenkins all read this form).

    <testsuites name="posref" tests= failures= errors= skipped= time=>
      <testsuite name="posref.<protocol>" ...>
        <properties>  suite version, vectors digest, target, profile, probe.*, environment.*
        <testcase classname="<protocol>" name="<case id>[<dtype>]" time= file= line=>   one per
                  case x dtype (x eager/compiled under --compile: name <case id>[<dtype>][compiled]);
                  file and line locate the adapter (CI annotations point there)
          <failure message= type=<first diagnosis code>>  for fail
          <error ...>                                      for error
          <skipped message=...>                            for skip (and an expected failure)
        <testcase classname="<protocol>.identities" name="<identity id>[<dtype>]">  black-box checks

"acceptable" cases pass (their notes go to <system-out>). Under --grad every case says its
gradient's verdict and error / budget (a failing gradient also its input, mismatch and worst
element), in <failure> or <system-out>, and the property posref.grad counts the gradients.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from conformance.reports._common import case_reason, citation, codes, compile_line, failure_details, fmt_float, \
    grad_overview, grad_summary, messages, output_dtype_note, summary_line, triton_line, write_text_atomic

# Characters XML 1.0 cannot carry at all (not even escaped); exception messages may hold them.
_INVALID_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text) -> str:
    """Text XML can carry: characters XML 1.0 has no place for (\\x1b, a lone surrogate) are
    written escaped, as the terminal shows them; ElementTree escapes <, > and & itself."""
    from conformance.isolation import printable

    return _INVALID_XML.sub(lambda m: printable(m.group()), str(text))


def _sub(parent, tag, **attrs):
    return ET.SubElement(parent, tag, {k: _clean(v) for k, v in attrs.items()})


def _case_details(report, case) -> str:
    lines = [citation(report, case)]
    lines.append(f"max abs error {fmt_float(case.max_abs_error)}, error / budget "
                 f"{fmt_float(case.budget_ratio)}, worst index {case.worst_index}")
    if grad_summary(case):  # --grad: the gradient's verdict and error / budget
        lines.append(grad_summary(case))
    for code, msg in zip(codes(case.diagnoses), messages(case.diagnoses)):
        lines.append(f"{code}: {msg}")
    lines += failure_details(case)
    lines += case.traceback_lines()  # where the adapter raised, in the user's code
    lines.extend(f"note: {n}" for n in case.notes)
    if case.repro:
        lines += ["", "reproduce:", case.repro]
    return "\n".join(lines)


def _first_code(diagnoses, default):
    found = codes(diagnoses)
    return found[0] if found else default


def build(report) -> ET.Element:
    """The XML tree (root <testsuites>) for a Report."""
    n_fail = n_err = n_skip = 0
    total_time = 0.0
    root = ET.Element("testsuites", {"name": "posref"})
    suite = _sub(root, "testsuite", name=f"posref.{report.protocol}")
    props = _sub(suite, "properties")
    fields = [
        ("posref.suite_version", report.suite_version),
        ("posref.vectors_digest", report.vectors_digest),
        ("posref.protocol", report.protocol),
        ("posref.target", report.target),
        ("posref.profile", report.profile),
        ("posref.summary", summary_line(report, digest_chars=None)),
    ]
    for key, value in (report.probe or {}).items():
        if not isinstance(value, dict):
            fields.append((f"posref.probe.{key}", "" if value is None else str(value)))
    for key, value in (report.environment or {}).items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        fields.append((f"environment.{key}", "" if value is None else value))
    if grad_overview(report):
        fields.append(("posref.grad", grad_overview(report)))
    if compile_line(report):
        fields.append(("posref.compile", compile_line(report)))
    if triton_line(report):
        fields.append(("posref.triton_interpret", triton_line(report)))
    for name, value in fields:
        _sub(props, "property", name=name, value=value)

    # file and line of the adapter on every testcase: CI annotations (GitHub, GitLab) point there.
    where = {} if not report.source else {"file": report.source["file"], "line": str(report.source["line"])}
    for case in report.cases:
        t = float(case.duration_s or 0.0)
        total_time += t
        # The compiled half (--compile) is a testcase of its own: "<id>[<dtype>][compiled]".
        tc = _sub(suite, "testcase", classname=report.protocol,
                  name=f"{case.id}[{case.dtype}]" + ("[compiled]" if getattr(case, "compiled", False) else ""),
                  time=f"{t:.6f}", **where)
        if case.expected_failure:  # as pytest writes an xfail: skipped, with the reason
            n_skip += 1
            _sub(tc, "skipped", type="pytest.xfail",
                 message=f"expected failure ({report.baseline['file']}): {case_reason(case)}")
        elif case.verdict == "fail":
            n_fail += 1
            el = _sub(tc, "failure", message=case_reason(case),
                      type=_first_code(case.diagnoses, "budget-exceeded"))
            el.text = _clean(_case_details(report, case))
        elif case.verdict == "error":
            n_err += 1
            el = _sub(tc, "error", message=case_reason(case),
                      type=_first_code(case.diagnoses, "error"))
            el.text = _clean(_case_details(report, case))
        elif case.verdict == "skip":
            n_skip += 1
            _sub(tc, "skipped", message=case_reason(case))
        elif case.verdict == "acceptable" or case.notes or case.grad or output_dtype_note(case):
            out = _sub(tc, "system-out")
            out.text = _clean(_case_details(report, case))

    for ident in report.identities:
        tc = _sub(suite, "testcase", classname=f"{report.protocol}.identities",
                  name=f"{ident.id}[{ident.dtype}]", time="0", **where)
        detail = (f"residual {fmt_float(ident.residual)}, bound {fmt_float(ident.bound)}"
                  + (f": {ident.message}" if ident.message else ""))
        diag = "\n".join(f"{c}: {m}" for c, m in zip(codes(ident.diagnoses), messages(ident.diagnoses)))
        if ident.verdict in ("fail", "error"):
            if ident.verdict == "fail":
                n_fail += 1
            else:
                n_err += 1
            el = _sub(tc, "failure" if ident.verdict == "fail" else "error",
                      message=ident.message or detail,
                      type=_first_code(ident.diagnoses, "identity"))
            el.text = _clean(detail + ("\n" + diag if diag else ""))
        elif ident.verdict == "skip":
            n_skip += 1
            _sub(tc, "skipped", message=ident.message or "skipped")
        elif ident.verdict == "xfail":  # listed in the baseline, as a case's expected failure
            n_skip += 1
            _sub(tc, "skipped", type="pytest.xfail",
                 message=f"expected failure ({(report.baseline or {}).get('file', 'baseline')}): "
                         f"{ident.message or detail}")

    n_tests = len(report.cases) + len(report.identities)
    counts = {"tests": str(n_tests), "failures": str(n_fail), "errors": str(n_err),
              "skipped": str(n_skip), "time": f"{total_time:.6f}"}
    for el in (root, suite):
        for k, v in counts.items():
            el.set(k, v)
    return root


def dumps(report) -> str:
    root = build(report)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(report, path) -> None:
    write_text_atomic(path, dumps(report))
