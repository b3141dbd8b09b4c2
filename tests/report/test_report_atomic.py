"""An interrupted ``dpfair report`` leaves the previous report (or none), never a truncated page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dpfair.report._build as build_module
from dpfair._atomic import atomic_open
from dpfair.report import ReportConfig, build_report
from dpfair.report._html import Section


@pytest.fixture(autouse=True)
def _cheap_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small stand-in sections: this test is about how the files are written."""
    for name in ("median", "facility", "fairclass"):

        def make(cfg: object, seed: int, tick: object, _name: str = name) -> Section:
            section = Section(_name, f"{_name} section")
            section.paragraph("x" * 200_000)  # a page large enough to be cut in half
            section.results = {"seed": seed}
            return section

        monkeypatch.setattr(build_module, f"{name}_section", make)


def test_results_first_page_last_and_interruption_keeps_old_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    real = build_module.write_text_atomic

    def recording(path: Path, text: str, *, mode: int | None = None) -> Path:
        written.append(Path(path).name)
        return real(path, text, mode=mode)

    monkeypatch.setattr(build_module, "write_text_atomic", recording)
    index = build_report(tmp_path, seed=0, config=ReportConfig.tiny())
    assert written == ["results.json", "index.html"]
    old_page = index.read_text(encoding="utf-8")
    assert old_page.rstrip().endswith("</html>")

    def killed_mid_page(path: Path, text: str, *, mode: int | None = None) -> Path:
        if Path(path).name != "index.html":
            return real(path, text, mode=mode)
        with atomic_open(path) as fh:
            fh.write(text[: len(text) // 2].encode("utf-8"))
            raise KeyboardInterrupt  # the user pressed Ctrl-C half-way through the page
        return Path(path)  # pragma: no cover

    monkeypatch.setattr(build_module, "write_text_atomic", killed_mid_page)
    with pytest.raises(KeyboardInterrupt):
        build_report(tmp_path, seed=1, config=ReportConfig.tiny())
    assert index.read_text(encoding="utf-8") == old_page
    json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))  # complete JSON
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html", "results.json"]
