"""Documentation markup to plain prose: HTML (lxml) and POD; code, navigation and indexes left out.

:func:`to_text` takes a document's bytes and its format (``FORMATS``) and returns its prose as paragraphs separated
by blank lines. Left out everywhere: code blocks (HTML ``<pre>`` and the highlighting/program-listing blocks of Sphinx,
DocBook and mdBook; POD's verbatim paragraphs), navigation (headers, footers, menus, sidebars of page links, tables
of contents), tables and scripts. Inline code (``<code>``, POD's ``C<...>``) stays: it is part of a sentence.

HTML: the page's main part where it marks one (``<main>``, ``role="main"``: Sphinx and mdBook), else its body, less
the elements ``DROP_TAGS`` names and those whose class or id is in ``DROP_CLASSES`` / ``DROP_IDS`` (the navigation
and code markers of Sphinx, DocBook/Publican, mdBook and the SQLite site).
POD (perlpod): command paragraphs give their text (headings, items), formatting codes their content (``L<text|link>``
its text, ``E<gt>`` its character), ``=begin``/``=end`` and ``=for`` blocks for other formatters are left out.
"""
from __future__ import annotations

import html
import re

FORMATS = ("html", "pod", "text")

DROP_TAGS = ("script", "style", "noscript", "nav", "header", "footer", "form", "button", "select", "input", "pre",
             "svg", "math", "table", "iframe", "object", "img")
# class tokens: Sphinx (sphinxsidebar, related, highlight*, headerlink, toctree-wrapper, sig: an API signature),
# DocBook/Publican (navheader, navfooter, docnav, toc, programlisting, screen, synopsis, indexterm), mdBook (nav-*),
# rustdoc (code-header, item-decl: signatures; rightside, srclink, test-arrow: links), javadoc (member-signature,
# type-signature, sub-nav), SQLite's site (nosearch, menu, searchmenu, fancy_toc)
DROP_CLASSES = {"sphinxsidebar", "related", "footer", "headerlink", "toctree-wrapper", "sig", "sig-object",
                "highlight", "doctest", "navheader", "navfooter", "docnav", "toc", "lot", "programlisting", "screen",
                "synopsis", "cmdsynopsis", "funcsynopsis", "literallayout", "indexterm", "nav-chapters",
                "nav-wrapper", "mobile-nav-chapters", "code-header", "item-decl", "rightside", "srclink", "since",
                "out-of-band", "test-arrow", "notable-traits", "tooltip", "member-signature", "type-signature",
                "sub-nav", "top-nav", "legal-copy", "nosearch", "menu", "searchmenu", "fancy_toc", "breadcrumbs"}
# rustdoc's lists of the blanket and auto-trait implementations every type page repeats
DROP_IDS = {"menu-bar", "sidebar", "searchbar-outer", "search-wrapper", "banner", "searchbox",
            "blanket-implementations", "blanket-implementations-list", "synthetic-implementations",
            "synthetic-implementations-list"}
BLOCK_TAGS = {"p", "div", "section", "article", "main", "li", "dt", "dd", "dl", "ul", "ol", "h1", "h2", "h3", "h4",
              "h5", "h6", "blockquote", "br", "hr", "figure", "figcaption", "caption", "aside", "details", "summary"}


def to_text(data: bytes, fmt: str) -> str:
    """The prose of one document, paragraphs separated by a blank line. Raises ValueError for an unknown format."""
    if fmt == "html":
        return html_text(data)
    if fmt == "pod":
        return pod_text(data.decode("utf-8", errors="replace"))
    if fmt == "text":
        return data.decode("utf-8", errors="replace")
    raise ValueError(f"unknown markup format {fmt!r}; expected one of {FORMATS}")


def _dropped(el) -> bool:
    if el.tag in DROP_TAGS:
        return True
    classes = set((el.get("class") or "").split())
    return bool(classes & DROP_CLASSES or any(c.startswith("highlight-") for c in classes)
                or el.get("id") in DROP_IDS or "display:none" in (el.get("style") or "").replace(" ", ""))


def html_text(data: bytes) -> str:
    """The prose of an HTML page (module docstring); "" for a page with no body."""
    import lxml.html

    if not data.strip():
        return ""
    root = lxml.html.document_fromstring(data)
    main = root.xpath("//main | //*[@role='main']")
    body = main[0] if main else root.find("body")
    if body is None:
        return ""
    for el in list(body.iter()):
        if not isinstance(el.tag, str):  # comments, processing instructions
            el.drop_tree()
        elif el is not body and _dropped(el):
            el.drop_tree()
    for el in body.iter():
        el.text = _squash(el.text)
        el.tail = _squash(el.tail)
        if el.tag in BLOCK_TAGS:
            el.tail = "\n\n" + (el.tail or "")
            if el.tag in ("li", "dt", "dd"):
                el.text = "\n\n" + (el.text or "")
    return _paragraphs(body.text_content())


def _squash(text: str | None) -> str | None:
    return None if text is None else re.sub(r"\s+", " ", text)


def _paragraphs(text: str) -> str:
    """Paragraphs, each on one line; a paragraph of one word ending in ':' (the caption of a code block or diagram
    left out) is dropped."""
    paras = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return "\n\n".join(p for p in paras if p and not re.fullmatch(r"\S+:", p))


# formatting codes, innermost first: X<< ... >> and X<<< ... >>> (whose text may hold < and >), then X<...>
POD_CODES = ([re.compile(rf"([A-Z])<{{{n}}}\s+(.*?)\s+>{{{n}}}", re.S) for n in (3, 2)]
             + [re.compile(r"([A-Z])<([^<>]*)>")])
POD_ENTITIES = {"lt": "\ue000", "gt": "\ue001", "verbar": "|", "sol": "/"}  # < and > held back while codes nest


def _pod_code(match: re.Match) -> str:
    code, body = match.group(1), match.group(2)
    if code in ("X", "Z"):  # index entries, zero-width
        return ""
    if code == "E":
        if body in POD_ENTITIES:
            return POD_ENTITIES[body]
        if body.isdigit() or re.fullmatch(r"0x[0-9a-fA-F]+", body):
            return chr(int(body, 0))
        return html.unescape(f"&{body};")
    if code == "L":  # L<text|name>, L<name/"section">, L<name>
        body = body.split("|", 1)[0] if "|" in body else body.replace('/"', ' "')
    return body


def pod_text(source: str) -> str:
    """The prose of a POD document (module docstring): verbatim (indented) paragraphs and non-text ``=begin``/``=for``
    blocks left out, formatting codes replaced by their text."""
    out, in_block, in_pod = [], False, False
    for para in re.split(r"\n[ \t]*\n", source.replace("\r\n", "\n")):
        if not para.strip():
            continue
        if para.startswith("="):
            command, rest = re.match(r"=(\w*)\s*(.*)", para, re.S).groups()
            in_pod = command != "cut"
            if in_block:
                in_block = command != "end"
            elif command == "begin":
                in_block = not rest.startswith("text")
            elif command.startswith("head") or command == "item":
                out.append(re.sub(r"^[*\d.]+\s*", "", rest) if command == "item" else rest)
            continue
        if in_block or not in_pod or para[0] in " \t":
            continue  # inside a non-text block, outside POD (code after =cut) or verbatim (code)
        out.append(para)
    text = "\n\n".join(" ".join(p.split()) for p in out)
    for pattern in POD_CODES:
        n = 1
        while n:
            text, n = pattern.subn(_pod_code, text)
    text = text.replace("\ue000", "<").replace("\ue001", ">")
    return "\n\n".join(p.strip() for p in text.split("\n\n") if p.strip())
