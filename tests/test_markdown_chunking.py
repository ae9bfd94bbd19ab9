from vaultseek.chunking import ChunkingParams, chunk_note
from vaultseek.markdown import parse_note


def chunks_of(text: str, path: str = "n.md", **params):
    return chunk_note(parse_note(path, text), ChunkingParams(**params))


def test_front_matter_fields():
    note = parse_note(
        "dir/OAuth.md",
        "---\ntitle: OAuth Token Rotation\ntags: [security, '#authentication']\naliases: token refresh\n"
        "type: runbook\ncreated: 2025-03-14\n---\nBody #inline-tag text\n",
    )
    assert note.title == "OAuth Token Rotation"
    assert note.tags == ("security", "authentication", "inline-tag")
    assert note.aliases == ("token refresh",)
    assert note.type == "runbook"
    assert note.date == "2025-03-14"
    assert note.body_start_line == 8


def test_title_falls_back_to_h1_then_file_name():
    assert parse_note("a/b.md", "# Heading One\ntext").title == "Heading One"
    note = parse_note("a/My Note.md", "no heading here")
    assert note.title == "My Note" and note.explicit_title is None


def test_malformed_front_matter_is_indexed_as_text_with_warning():
    note = parse_note("x.md", "---\ntitle: [unclosed\n---\nbody words here\n")
    assert note.warnings and "malformed front matter" in note.warnings[0]
    assert "title: [unclosed" in note.body
    assert note.title == "x"


def test_private_flag_and_tag():
    assert parse_note("x.md", "---\nprivate: true\n---\nsecret plans").private
    assert parse_note("x.md", "---\ntags: [Private]\n---\nsecret plans").private
    assert not parse_note("x.md", "---\nprivate: false\n---\nplans").private


def test_heading_context_and_sections():
    text = "---\ntitle: T\ntags: [a, b]\n---\n## First\n" + "alpha " * 10 + "\n## Second\n" + "beta " * 10
    chunks = chunks_of(text)
    assert [c.section for c in chunks] == ["First", "Second"]
    assert all(c.heading_context == "T | note | a, b" for c in chunks)
    assert chunks[0].start_line == 6
    assert chunks[0].embed_text.startswith("T\nFirst\n")


def test_headings_inside_code_fences_are_not_headings():
    text = "## Real\nSome text that is long enough to keep.\n```bash\n## not a heading\necho hi\n```\nmore text"
    chunks = chunks_of(text)
    assert len(chunks) == 1
    assert "## not a heading" in chunks[0].text


def test_tilde_fences_and_unclosed_fence():
    text = "## A\n~~~\n## inside\n~~~\nlong enough text after the fence\n## B\n```\n## still code to the end\n"
    sections = [c.section for c in chunks_of(text)]
    assert sections == ["A"]  # B's body is only 30-odd chars of code... kept only if long enough
    text2 = text + "x" * 40
    assert [c.section for c in chunks_of(text2)] == ["A", "B"]


def test_skipped_sections_and_short_sections_dropped():
    text = "## Intro\n" + "words " * 10 + "\n## Related\n- [[Other note with a long name here]]\n## See Also\nlots of links " * 1 + "\n## Tiny\nshort\n"
    assert [c.section for c in chunks_of(text)] == ["Intro"]


def test_long_section_splits_at_h3_then_paragraphs_then_hard():
    para = ("word " * 90).strip()  # ~450 chars
    body = "## Big\n" + "\n\n".join([para] * 3) + "\n### Sub one\n" + "\n\n".join([para] * 6) + "\n### Sub two\nshort but over thirty characters long\n"
    chunks = chunks_of(body)
    assert all(len(c.text) <= 2000 for c in chunks)
    assert [c.section for c in chunks] == ["Big", "Big > Sub one", "Big > Sub one", "Big > Sub two"]


def test_no_chunk_exceeds_the_limit_even_for_one_giant_line():
    text = "## Table\n| " + " | ".join(["cell"] * 3000) + " |\n" + "x" * 7000
    chunks = chunks_of(text)
    assert len(chunks) > 3
    assert max(len(c.text) for c in chunks) <= 2000
    assert sum(len(c.text) for c in chunks) >= 7000 + 3000 * 5


def test_empty_note_has_no_chunks():
    assert chunks_of("") == []
    assert chunks_of("---\ntitle: x\n---\n") == []
