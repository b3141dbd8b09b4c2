"""The HTML report: self-contained, with embedded figures, reproducible from its seed."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from dpfair import InvalidParameterError
from dpfair.report import ReportConfig, build_report

_IMG = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    return build_report(out, seed=0, config=ReportConfig.tiny())


def test_report_is_self_contained_html_with_embedded_pngs(tiny_report: Path) -> None:
    assert tiny_report.name == "index.html"
    html = tiny_report.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    images = _IMG.findall(html)
    assert len(images) >= 4
    for b64 in images:
        assert base64.b64decode(b64).startswith(b"\x89PNG\r\n\x1a\n")
    assert not re.search(r'(src|href)="(https?:)?//', html), "no external assets"


def test_every_figure_states_setting_seed_and_privacy(tiny_report: Path) -> None:
    html = tiny_report.read_text(encoding="utf-8")
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S)
    assert len(captions) >= 12  # 5 median + 3 facility + 3 CDP-Fair + 1 FDP-Fair
    for caption in captions:
        assert "Setting:" in caption
        assert "Seed 0" in caption
        assert "Privacy" in caption
        # the unit of the budget spent: zCDP (medians), pure ε-DP (facility location) or
        # (ε, δ)-DP per fit (fair classification)
        assert ("zCDP" in caption or re.search(r"\d(\.\d+)?-DP", caption)
                or re.search(r"\(\d[\d.]*, [\d.e+-]+\)-DP", caption)), caption


# Words a reader who has not read the papers (or our issue tracker) cannot follow.
_JARGON = re.compile(
    r"\bCTM\b|\bSPM\b|D_k|p_α|\bS1\b|\bS2\b|Thm\s*\d|inequality \(\d+\)|\bineq\.|"
    r"[Ii]ssue \d|\(issue|e\^\{|\^\{|\^-\d|\\[a-z]+|SeedSequence stream"
)


def test_the_report_reads_without_the_papers(tiny_report: Path) -> None:
    """A summary at the top and per section, captions that say what to look at and name
    the privacy spent once, and no raw TeX, internal issue numbers or paper jargon."""
    html = tiny_report.read_text(encoding="utf-8")
    assert "At a glance" in html and "Differential privacy limits" in html
    sections = re.findall(r'<section id="([a-z]+)"><h2>[^<]*</h2>\s*(.{0,40})', html)
    assert [s for s, _ in sections] == ["median", "facility", "fairclass", "federated"]
    assert all(start.startswith('<div class="summary">') for _, start in sections)
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S)
    for caption in captions:
        assert "What to look at" in caption, caption[:200]
        assert caption.count("Privacy:") == 1, caption
    text = re.sub(r'src="data:[^"]*"', "", html)  # the figures' bytes aside
    found = sorted({m.group(0) for m in _JARGON.finditer(text)})
    assert not found, f"jargon or raw TeX in the report: {found}"


def test_results_json_matches_configuration(tiny_report: Path) -> None:
    results = json.loads((tiny_report.parent / "results.json").read_text(encoding="utf-8"))
    median = results["sections"]["median"]
    cfg = ReportConfig.tiny().median
    for counts in median["coverage"]["lognormal"].values():
        assert counts["trials"] == cfg.coverage_datasets
        assert 0 <= counts["covered"] <= counts["trials"]
    widths = median["relative_width"]["median"]
    assert set(widths) == {"expmech", "cdf", "binsearch", "binsearch_cdf"}
    for per_rho in widths.values():
        assert all(w > 0 for w in per_rho.values())
    private = median["bundled"]["private"]
    assert all(r["privacy"]["rho"] == pytest.approx(cfg.real_rho) for r in private.values())


def test_same_seed_same_numbers(tiny_report: Path, tmp_path: Path) -> None:
    again = build_report(tmp_path, seed=0, config=ReportConfig.tiny())
    first = json.loads((tiny_report.parent / "results.json").read_text(encoding="utf-8"))
    second = json.loads((again.parent / "results.json").read_text(encoding="utf-8"))
    assert first["sections"] == second["sections"]


def test_bad_seed(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match=r"seed=-1"):
        build_report(tmp_path, seed=-1, config=ReportConfig.tiny())


@pytest.mark.slow
def test_quick_report_through_the_cli(tmp_path: Path) -> None:
    """What `make demo` runs, end to end (about 10-30 s)."""
    from typer.testing import CliRunner

    from dpfair.cli import app

    result = CliRunner().invoke(app, ["report", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    index = Path(result.stdout.strip())
    assert index == tmp_path / "index.html"
    assert len(_IMG.findall(index.read_text(encoding="utf-8"))) >= 4
