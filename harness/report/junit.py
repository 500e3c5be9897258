"""The regression gate as JUnit XML, the test report CI systems show (GitHub Actions' test reporters, GitLab's
`artifacts:reports:junit`, Jenkins' junit step): one testcase per model, CPUS value and check, a failing check as
<failure>, a skipped one as <skipped>, every verdict's reason in <system-out>. Written with xml.etree, so names and
messages are escaped whatever they hold."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.analysis.regression_gate import FAIL, SKIP, GateResult

SUITE = "harness check"


def junit_xml(result: GateResult) -> str:
    checks = result.checks
    counts = {"tests": str(len(checks)), "failures": str(len(result.failed)), "errors": "0",
              "skipped": str(sum(c.verdict == SKIP for c in checks))}
    suites = ET.Element("testsuites", {"name": SUITE, **counts})
    title = f"{SUITE}: {result.session} against {result.baseline}"
    suite = ET.SubElement(suites, "testsuite", {"name": title, **counts})
    properties = ET.SubElement(suite, "properties")
    for name, value in (("baseline", result.baseline), ("session", result.session), ("metric", result.metric),
                        ("alpha", f"{result.alpha:g}"), ("max_slowdown", f"{result.max_slowdown:g}"),
                        ("max_memory_growth", f"{result.max_memory_growth:g}")):
        ET.SubElement(properties, "property", name=name, value=value)
    for check in checks:
        case = ET.SubElement(suite, "testcase", classname=f"harness.check.{check.model}",
                             name=f"{check.check} cpus={check.cpus:g}", time="0")
        if check.verdict == FAIL:
            ET.SubElement(case, "failure", message=check.message, type="regression").text = check.message
        elif check.verdict == SKIP:
            ET.SubElement(case, "skipped", message=check.message)
        ET.SubElement(case, "system-out").text = check.message
    if result.notes or result.missing:
        missing = [f"in the baseline, not in the session: {', '.join(result.missing)}"] if result.missing else []
        ET.SubElement(suite, "system-out").text = "\n".join([*result.notes, *missing])
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
