"""The README's findings at a glance: what the render step writes from the audit CSV, and what the README shows."""
from pathlib import Path

import pytest

from suite.provenance import read_csv
from suite.report import findings
from suite.report.audit import save_audit

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_the_readme_shows_the_findings_the_render_step_wrote_from_the_committed_audit():
    written = (ROOT / "paper_tables" / "findings.md").read_text()
    assert findings.findings_markdown(read_csv(ROOT / "paper_tables" / "claims_audit.csv")) == written
    readme = README.read_text()
    assert findings.with_block(readme, written) == readme, \
        "README.md's findings block differs from paper_tables/findings.md: python -m suite.report.findings"


def test_save_audit_writes_the_findings_of_the_csv_it_wrote(tmp_path):
    audit = read_csv(ROOT / "paper_tables" / "claims_audit.csv")
    save_audit(tmp_path, read_csv(ROOT / "paper_tables" / "derived.csv"), audit)
    block = (tmp_path / "findings.md").read_text()
    assert block == findings.findings_markdown(read_csv(tmp_path / "claims_audit.csv"))
    assert block.startswith(findings.START) and block.rstrip().endswith(findings.END)
    assert max(len(line) for line in block.splitlines()) <= findings.WIDTH
    for cid in findings.HEADLINES:
        assert f"- {cid}, " in block


def test_the_block_counts_verdicts_by_kind_and_names_the_proxies():
    audit = read_csv(ROOT / "paper_tables" / "claims_audit.csv")
    raw = findings.findings_markdown(audit)
    block = " ".join(raw.split())
    assert f"({len(audit)} claims;" in block
    consistent = (audit["paper_verdict"] == "consistent with the paper's own tables").sum()
    assert f"{consistent} consistent," in block
    proxies = audit[audit["measured_kind"] == "proxy"]
    invalid = (proxies["measured_verdict"] == "invalid").sum()
    assert "Proxies (another metric or a far smaller scale):" in block and f"{invalid} invalid" in block
    items = {item.split(",")[0]: " ".join(item.split()) for item in raw.split("\n- ")[1:]}
    for cid in set(findings.HEADLINES) & set(proxies["id"]):  # a proxy's outcome reads "proxy", what and its scale
        assert "; proxy (" in items[cid] and " params" in items[cid], items[cid]
    assert "C17 21.9x (8 GPUs with sequence parallelism" in block and "C19 3.45x (1 x H100" in block


def test_the_cli_rewrites_only_the_block_and_refuses_a_readme_without_one(tmp_path):
    (tmp_path / "f.md").write_text(f"{findings.START}\nnew\n{findings.END}\n")
    (tmp_path / "R.md").write_text(f"# title\n{findings.START}\nold\n{findings.END}\n\nrest\n")
    findings.main(["--readme", str(tmp_path / "R.md"), "--findings", str(tmp_path / "f.md")])
    assert (tmp_path / "R.md").read_text() == f"# title\n{findings.START}\nnew\n{findings.END}\n\nrest\n"
    with pytest.raises(ValueError, match="no findings block"):
        findings.with_block("# no markers\n", "x")


def test_the_readme_reads_in_five_minutes():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150 and max(map(len, lines)) <= 120
