"""Griffe extension: render dpfair's reStructuredText-flavoured docstrings as Markdown.

The docstrings are numpydoc and use Sphinx roles (``:func:`name```, ``:class:`~a.B```,
``:mod:`.median```, ...), ``.. math::`` directives, ``Text::`` literal blocks and bare
``>>>`` doctest lines. mkdocstrings renders Markdown, so without this extension the roles
appear as literal text and the doctests run together into one paragraph. Before any
docstring is parsed, this extension rewrites, for every object of the package:

* a role into an *optional* autorefs cross-reference ``<autoref identifier=PATH optional>``
  whose ``PATH`` is resolved in the docstring's own scope (its module's imports and
  members, with Griffe's :meth:`Object.resolve`), so ``:func:`confidence_interval``` in
  ``dpfair.median`` links to ``dpfair.median.confidence_interval``. A target that is not
  rendered on the site (a private helper) becomes plain code, never a broken link;
* a run of ``>>>``/``...`` lines and their output outside a fenced block into a ``pycon``
  fenced block (sections titled ``Examples`` are left to the numpydoc parser, which does
  the same);
* ``.. math:: formula`` into a fenced ``text`` block (the site loads no math renderer);
* a class whose ``__doc__`` is computed (no docstring to static analysis) gets the
  imported class's ``__doc__``, so it is not left out of the reference;
* a paragraph ending in ``::`` (reST literal block) into one ending in ``:`` followed by a
  fenced block holding the indented lines.

Wired in ``mkdocs.yml`` (``handlers.python.options.extensions``); ``tests/test_docs.py``
fails if a role survives into the built HTML.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(func|class|meth|mod|data|attr|obj|exc|const|term|ref|doc):`([^`]+)`")
_TITLED = re.compile(r"^(.*?)\s*<([^>]+)>$")


def _module_of(obj: griffe.Object) -> griffe.Object:
    return obj if obj.is_module else obj.module


def resolve_target(obj: griffe.Object, target: str) -> str | None:
    """The full path that ``target`` names in ``obj``'s scope, or None when unknown."""
    name = target.lstrip("~!")
    if name.startswith("."):  # relative to the docstring's package (Sphinx's leading dot)
        mod = _module_of(obj)
        pkg = mod if mod.is_package or mod.is_init_module else (mod.parent or mod)
        dots = len(name) - len(name.lstrip("."))
        for _ in range(dots - 1):
            pkg = pkg.parent or pkg
        return f"{pkg.path}.{name.lstrip('.')}" if name.lstrip(".") else pkg.path
    head, _, rest = name.partition(".")
    if head == "dpfair":
        return name
    for scope in (obj, _module_of(obj)):
        try:
            base = scope.resolve(head)
        except (griffe.NameResolutionError, griffe.AliasResolutionError, KeyError):
            continue
        return f"{base}.{rest}" if rest else base
    return None


def canonical(obj: griffe.Object, path: str) -> str:
    """``path`` with re-exports followed to where the object is defined (and rendered)."""
    try:
        found = obj.modules_collection[path]
        return str(found.canonical_path)
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError, ValueError):
        return path


def _display(target: str) -> str:
    name = target.lstrip("!")
    if name.startswith("~"):
        return name[1:].rsplit(".", 1)[-1]
    return name.lstrip(".")


def rewrite_roles(text: str, obj: griffe.Object) -> str:
    """Every Sphinx role of ``text`` as an optional cross-reference (or plain code)."""

    def sub(match: re.Match[str]) -> str:
        role, body = match.group(1), match.group(2).strip()
        titled = _TITLED.match(body)
        title, target = (titled.group(1), titled.group(2)) if titled else (None, body)
        shown = title or _display(target)
        if role in {"term", "ref", "doc"}:
            return f"*{shown}*"
        path = resolve_target(obj, target)
        path = canonical(obj, path) if path is not None else None
        code = f"<code>{html.escape(shown)}</code>"
        if path is None or not path.startswith("dpfair"):
            return f"`{shown}`"
        return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'

    return ROLE.sub(sub, text)


_DOCTEST = re.compile(r"^(\s*)>>> ")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SECTION = re.compile(r"^\s*-{3,}\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def rewrite_blocks(text: str) -> str:
    """Doctest runs, ``.. math::`` and ``::`` literal blocks as fenced Markdown blocks."""
    lines = text.split("\n")
    out: list[str] = []
    section = ""
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        if in_fence:
            out.append(line)
            i += 1
            continue
        if i + 1 < len(lines) and _SECTION.match(lines[i + 1]) and line.strip():
            section = line.strip().lower()
        doctest = _DOCTEST.match(line)
        if doctest and section != "examples":
            pad = doctest.group(1)
            block: list[str] = []
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) >= len(pad):
                block.append(lines[i][len(pad):])
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += [f"{pad}```pycon", *(f"{pad}{b}" for b in block), f"{pad}```"]
            continue
        stripped = line.strip()
        if stripped.startswith(".. math::"):
            pad = " " * _indent(line)
            formula = [stripped[len(".. math::"):].strip()]
            i += 1
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) > len(pad):
                formula.append(lines[i].strip())
                i += 1
            out += [f"{pad}```text", *(f"{pad}{f}" for f in formula if f), f"{pad}```"]
            continue
        if stripped.endswith("::") and not stripped.startswith(".."):
            pad = _indent(line)
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and _indent(lines[j]) > pad:
                head = line.rstrip()[:-2].rstrip()
                out.append(head + ":" if head.strip() else "")
                out += ["", " " * pad + "```text"]
                k = j
                body: list[str] = []
                while k < len(lines) and (not lines[k].strip() or _indent(lines[k]) > pad):
                    body.append(lines[k])
                    k += 1
                while body and not body[-1].strip():
                    body.pop()
                    k -= 1
                inner = min(_indent(b) for b in body if b.strip())
                out += [(" " * pad + b[inner:]) if b.strip() else "" for b in body]
                out.append(" " * pad + "```")
                i = k
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def rewrite(text: str, obj: griffe.Object) -> str:
    """Roles, doctests and literal blocks of one docstring, as Markdown."""
    return rewrite_roles(rewrite_blocks(text), obj)


def computed_docstring(obj: griffe.Object) -> str | None:
    """The ``__doc__`` of a class that builds it (``__doc__ = (TEXT + COMMON)``).

    Static analysis sees no docstring there, and mkdocstrings would leave the class out of
    the reference; the value is read from the imported class instead.
    """
    if not obj.is_class or "__doc__" not in obj.members:
        return None
    try:
        module = importlib.import_module(obj.module.path)
        doc = getattr(module, obj.name).__doc__
    except (ImportError, AttributeError):
        return None
    return inspect.cleandoc(doc) if isinstance(doc, str) else None


class SphinxToMarkdown(griffe.Extension):
    """Rewrite every docstring of the loaded package once, before it is parsed."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is None and (doc := computed_docstring(obj)) is not None:
                obj.docstring = griffe.Docstring(doc, parent=obj, parser=griffe.Parser.numpy)
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj.docstring.value, obj)
            stack.extend(m for m in obj.members.values() if not m.is_alias)
