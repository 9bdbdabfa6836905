"""Unit tests of outputs as an agent reads them (pure functions)."""

from __future__ import annotations

import pytest

from jupyter_mcp.notebooks import outputs

pytestmark = pytest.mark.unit

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def test_summaries_name_what_they_leave_out():
    summary = outputs.summarize([
        {"output_type": "stream", "name": "stderr", "text": ["\x1b[31mred\x1b[0m ", "text\n"]},
        {"output_type": "error", "ename": "ValueError", "evalue": "bad",
         "traceback": ["\x1b[0;31mTraceback\x1b[0m", "ValueError: bad"]},
        {"output_type": "display_data", "data": {"image/png": PNG}, "metadata": {}},
        {"output_type": "execute_result", "data": {"text/html": "<b>bold</b>", "text/plain": "<HTML>"},
         "metadata": {}, "execution_count": 1},
    ], max_chars=100)
    assert summary[0] == {"output_type": "stream", "name": "stderr", "text": "red text\n"}
    assert summary[1] == {"output_type": "error", "ename": "ValueError", "evalue": "bad",
                          "text": "Traceback\nValueError: bad"}
    assert summary[2] == {"output_type": "display_data", "mime_types": ["image/png"], "text": "[image/png]"}
    # "<HTML>" only names the object: its HTML, as text, says what it is
    assert summary[3]["text"] == "bold" and summary[3]["mime_types"] == ["text/html", "text/plain"]


def test_rich_outputs_read_as_their_best_text():
    def text(data):
        return outputs.summarize([{"output_type": "display_data", "data": data, "metadata": {}}], 0)[0]["text"]

    html = ("<style>td {color: red}</style><div><h3>Scores</h3><table><tr><th>name</th><th>score</th></tr>"
            "<tr><td>ada</td><td>9 &amp; 10</td></tr></table><script>alert(1)</script></div>")
    assert text({"text/html": html, "text/plain": "<IPython.core.display.HTML object>"}) == \
        "Scores\nname\tscore\nada\t9 & 10"
    assert text({"text/markdown": "# Title\n*it*", "text/plain": "<IPython.core.display.Markdown object>"}) == \
        "# Title\n*it*"
    assert text({"text/latex": "$x^2$", "text/plain": "<IPython.core.display.Latex object>"}) == "$x^2$"
    assert text({"application/json": {"a": 1}, "text/plain": "<IPython.core.display.JSON object>"}) == \
        '{\n "a": 1\n}'
    # a real text form wins over the rich ones: a DataFrame reads as its text table
    assert text({"text/html": "<table><tr><td>1</td></tr></table>", "text/plain": "   a\n0  1"}) == "   a\n0  1"
    assert text({"text/html": "<b>only html</b>"}) == "only html"


def test_read_images_are_attached_within_a_budget_and_named():
    figure = {"output_type": "display_data", "metadata": {},
              "data": {"image/png": PNG, "text/plain": "<Figure size 640x480 with 1 Axes>"}}
    big = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "A" * 4000}}
    images = outputs.Images(max_bytes=2000)
    summary = outputs.summarize([figure, big, figure], 100, images)
    assert [b.data for b in images.blocks] == [PNG, PNG] and images.blocks[0].mime_type == "image/png"
    assert summary[0]["text"] == "[image/png, 70 bytes: image 1 attached to this answer]"
    assert summary[1]["text"].startswith("[image/png, 3,000 bytes: not attached, over this answer's image budget")
    assert summary[2]["text"] == "[image/png, 70 bytes: image 2 attached to this answer]"
    left_out = outputs.Images(None)
    assert outputs.summarize([figure], 100, left_out)[0]["text"] == "[image/png, 70 bytes: not attached]"
    assert left_out.blocks == []


def test_a_cut_says_where_the_rest_is():
    long = [{"output_type": "stream", "name": "stdout", "text": "y" * 30}]
    assert outputs.summarize(long, 10)[0]["text"].endswith("20 more characters not shown; the notebook has them all]")
    scratch = outputs.to_content(long, 10, rest=None)[0].text
    assert scratch.endswith("not shown; raise max_output_chars to see more]") and "notebook" not in scratch


def test_long_texts_are_cut_with_a_note():
    cut = outputs.summarize([{"output_type": "stream", "name": "stdout", "text": "x" * 150}], max_chars=100)
    assert cut[0]["text"].startswith("x" * 100) and "50 more characters not shown" in cut[0]["text"]
    assert outputs.truncate("short", 0) == "short"  # 0: no limit


def test_content_blocks_merge_text_and_carry_images():
    blocks = outputs.to_content([
        {"output_type": "stream", "name": "stdout", "text": "one"},
        {"output_type": "display_data", "data": {"image/png": PNG + "\n", "text/plain": "<Figure>"}, "metadata": {}},
        {"output_type": "stream", "name": "stdout", "text": "two\n"},
    ])
    assert [b.type for b in blocks] == ["text", "image"]
    assert blocks[0].text == "one\ntwo\n"  # the figure's text/plain repr is not repeated
    assert blocks[1].data == PNG and blocks[1].mime_type == "image/png"
    assert outputs.to_content([]) == []


def test_odd_stored_outputs_are_read_without_failing():
    odd = [
        {"output_type": "display_data", "data": {"text/plain": 5}, "metadata": {}},
        {"output_type": "execute_result", "data": {"text/plain": ["a", 1], "text/html": {"x": 1}}, "metadata": {}},
        {"output_type": "display_data", "data": {"image/png": 7, "text/plain": "fig"}, "metadata": {}},
        {"output_type": "stream", "name": 3, "text": ["one ", None]},
        {"output_type": "error", "ename": 2, "evalue": None, "traceback": ["tb", 4]},
        {"output_type": "error", "traceback": "not a list"},
        {"output_type": "display_data", "data": "not a bundle"},
        {"data": {"application/json": {"k": [1]}}},
        "not even a dict",
        {"output_type": 9},
    ]
    summary = outputs.summarize(odd, max_chars=100)
    assert [s["text"] for s in summary] == ["5", "a1", "fig", "one null", "tb\n4", "not a list", "", '{\n "k": [\n  1\n ]\n}',
                                            "", ""]
    assert summary[3]["name"] == "3" and summary[4]["ename"] == "2" and summary[4]["evalue"] is None
    assert summary[8]["output_type"] == "unknown" and summary[9]["output_type"] == "9"
    assert all(isinstance(s["text"], str) and isinstance(s["output_type"], str) for s in summary)
    blocks = outputs.to_content(odd)
    assert [b.type for b in blocks] == ["text"]  # an image that is not text is no image
    assert blocks[0].text.startswith("5\na1\n")
    assert outputs.to_content("not a list") == [] and outputs.summarize(None, 10) == []
