"""The documentation site builds with warnings as errors and renders what it builds.

``mkdocs build --strict`` passing is not enough: a Sphinx role left in a docstring
(``:func:`name```) passes the build and shows up as literal text. So the built HTML is
checked for raw roles and reST leftovers, the navigation for every page, and the Griffe
extension that rewrites the docstrings (``docs/_hooks/griffe_docstrings.py``) on its own.

The build is skipped where the ``docs`` extra (MkDocs, Material, mkdocstrings) is not
installed; it takes a few seconds (one build per test session).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS = REPO_ROOT / "docs"
RAW_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|obj|exc|const):(?:`|<code>)")


def _has_docs_extra() -> bool:
    return all(importlib.util.find_spec(m) for m in ("mkdocs", "material", "mkdocstrings"))


needs_docs = pytest.mark.skipif(not _has_docs_extra(), reason="needs the docs extra")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    if not _has_docs_extra():
        pytest.skip("needs the docs extra")
    out = tmp_path_factory.mktemp("site")
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return out, run.stderr


@needs_docs
def test_site_builds_strict(site: tuple[Path, str]) -> None:
    out, _ = site
    api = (out / "api" / "median" / "index.html").read_text(encoding="utf-8")
    assert 'id="dpfair.median.confidence_interval"' in api  # the API reference is generated
    tables = (out / "reproduction" / "index.html").read_text(encoding="utf-8")
    assert tables.count("<table>") >= 2  # rendered from docs/results/*.json
    fair = (out / "api" / "fairclass" / "index.html").read_text(encoding="utf-8")
    # A class whose __doc__ is computed (no static docstring) is still in the reference.
    assert 'id="dpfair.fairclass.CDPFairClassifier"' in fair


@needs_docs
def test_no_raw_sphinx_roles_in_the_html(site: tuple[Path, str]) -> None:
    out, _ = site
    found = []
    for page in sorted(out.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        for m in RAW_ROLE.finditer(text):
            found.append(f"{page.relative_to(out)}: …{text[m.start() - 40:m.end() + 40]!r}…")
        if ".. math::" in text:
            found.append(f"{page.relative_to(out)}: a raw '.. math::' directive")
    assert not found, "raw reST in the built site:\n" + "\n".join(found[:20])


@needs_docs
def test_cross_references_resolve_to_links(site: tuple[Path, str]) -> None:
    out, _ = site
    api = (out / "api" / "median" / "index.html").read_text(encoding="utf-8")
    # ":func:`confidence_interval_from_counts`" in dpfair.median: a link to its entry.
    assert re.search(
        r'<a class="autorefs autorefs-internal"[^>]*href="#dpfair\.median\.'
        r'confidence_interval_from_counts"', api
    )


@needs_docs
def test_module_examples_render_as_code(site: tuple[Path, str]) -> None:
    out, _ = site
    api = (out / "api" / "median" / "index.html").read_text(encoding="utf-8")
    assert '<span class="gp">&gt;&gt;&gt; </span>' in api  # a highlighted pycon block
    assert "<blockquote>" not in api


def _nav_pages(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_pages(n) for n in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(_nav_pages(v) for v in nav.values()))
    return set()


def _mkdocs_nav() -> set[str]:
    # mkdocs.yml may carry !!python tags elsewhere; the nav is plain YAML.
    yaml = pytest.importorskip("yaml")
    text = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = yaml.safe_load(text[text.index("\nnav:") :])["nav"]
    return _nav_pages(nav)


def test_every_docs_page_is_in_the_navigation() -> None:
    pages = {
        str(p.relative_to(DOCS))
        for p in DOCS.rglob("*.md")
        if not any(part.startswith("_") for part in p.relative_to(DOCS).parts)
    }
    nav = _mkdocs_nav()
    assert not (pages - nav), f"docs pages missing from mkdocs.yml's nav: {sorted(pages - nav)}"
    assert not (nav - pages), f"nav entries without a page: {sorted(nav - pages)}"


@needs_docs
def test_build_reports_no_page_outside_the_nav(site: tuple[Path, str]) -> None:
    _, log = site
    assert "not included in the \"nav\"" not in log, log


# --- the Griffe extension on its own -------------------------------------------------------

def _extension():
    griffe = pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location(
        "griffe_docstrings", DOCS / "_hooks" / "griffe_docstrings.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return griffe, mod


def test_roles_become_optional_cross_references() -> None:
    griffe, ext = _extension()
    pkg = griffe.load("dpfair.median", search_paths=[str(REPO_ROOT / "src")])
    text = ext.rewrite_roles(
        "See :func:`confidence_interval`, :class:`~dpfair.privacy.Budget`, "
        ":mod:`._api` and :func:`shown <dpfair.data.read_column>`.", pkg
    )
    assert ":func:" not in text and ":class:" not in text and ":mod:" not in text
    assert 'identifier="dpfair.median._api.confidence_interval" optional' in text
    assert '<code>Budget</code>' in text  # "~" shows the last component
    assert 'identifier="dpfair.median._api" optional><code>_api</code>' in text  # relative
    # A re-export is followed to where the object is defined (autorefs knows that path).
    assert 'identifier="dpfair.data._io.read_column" optional><code>shown</code>' in text


def test_doctests_math_and_literal_blocks_become_fences() -> None:
    _, ext = _extension()
    text = (
        "Intro.\n>>> x = 1\n>>> x\n1\n\nThe score is\n\n.. math:: s = -|j - k|\n\n"
        "Layout::\n\n    a  b\n    c  d\n\nAfter.\n\nExamples\n--------\n>>> 2\n2\n"
    )
    out = ext.rewrite_blocks(text)
    assert "```pycon\n>>> x = 1\n>>> x\n1\n```" in out
    assert "```text\ns = -|j - k|\n```" in out
    assert "Layout:\n\n```text\na  b\nc  d\n```\n\nAfter." in out
    assert out.endswith("Examples\n--------\n>>> 2\n2\n")  # left to the numpydoc parser
