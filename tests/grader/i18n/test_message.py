"""A message is a value of its own, not a string (issue 53): its English text is ``str(m)``,
and every string operation that would keep the English and drop the id (``+``, ``join``, an
f-string, ``format``) raises instead of silently losing it (lesson 11's ``close_logits``
lost its hints' ids that way). A larger message is composed of messages."""

from __future__ import annotations

import json
import pickle

import pytest

from grader import i18n
from grader.common.hint import Hint
from grader.i18n import Message, concat, join, msg, with_detail

ZH = {"the output of {what} is wrong": "{what} 的输出不对", "the decoder layer": "解码器层",
      "a {type_name}": "一个 {type_name}", "{message} ({detail})": "{message}（{detail}）"}


@pytest.fixture()
def fake_zh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(i18n, "catalogue", lambda lang: ZH if lang == "zh" else {})


def test_a_message_is_no_string_and_string_operations_refuse_it() -> None:
    hint = msg("the output of {what} is wrong", what=msg("the decoder layer"))
    assert not isinstance(hint, str)
    assert str(hint) == "the output of the decoder layer is wrong"
    for lose_the_id in (lambda: hint + " (see above)", lambda: "hint: " + hint,  # type: ignore[operator]
                        lambda: f"{hint}", lambda: format(hint, ""), lambda: "; ".join([hint]),  # type: ignore[list-item]
                        lambda: f"{hint}", lambda: "decoder" in hint):  # type: ignore[operator]
        with pytest.raises(TypeError):
            lose_the_id()


def test_a_message_is_an_immutable_value() -> None:
    a = msg("the output of {what} is wrong", what=msg("the decoder layer"))
    b = msg("the output of {what} is wrong", what=msg("the decoder layer"))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != msg("the output of {what} is wrong", what="the decoder layer")  # same English, no id inside
    assert a != str(a)
    with pytest.raises(AttributeError):
        a.id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.args["what"] = "x"  # type: ignore[index]
    assert pickle.loads(pickle.dumps(a)) == a
    assert Message.from_dict(json.loads(json.dumps(a.to_dict()))) == a


def test_composed_messages_keep_every_id_and_render_piece_by_piece(fake_zh: None) -> None:
    """concat/join: what ``+`` and ``str.join`` were; the text between stays as written."""
    who = msg("a {type_name}", type_name="MultiHeadAttention")
    call = concat("f(", join(", ", [who, "axis=0"]), ")")
    assert isinstance(call, Message) and str(call) == "f(a MultiHeadAttention, axis=0)"
    assert who in call.walk()
    assert i18n.render(call, "zh") == "f(一个 MultiHeadAttention, axis=0)"
    assert concat("f(", "x", ")") == "f(x)" and join(", ", ["a", "b"]) == "a, b"  # no message: text
    assert str(concat("{literal} ", who)) == "{literal} a MultiHeadAttention"
    detail = with_detail(msg("the output of {what} is wrong", what=msg("the decoder layer")), call)
    assert i18n.render(detail, "zh") == "解码器层 的输出不对（f(一个 MultiHeadAttention, axis=0)）"


def test_a_hint_read_back_keeps_its_message() -> None:
    hint = Hint(msg("the output of {what} is wrong", what=msg("the decoder layer")), "axis")
    assert Hint.from_dict(json.loads(json.dumps(hint.as_dict()))) == hint
    assert str(hint) == "the output of the decoder layer is wrong"


def test_a_coursekit_sentence_is_told_as_the_message_of_its_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """coursekit imports no grader: its errors say a Sentence (template and fields as data),
    which the grader renders from its id like a message, alone, inside a message or raised;
    the extractor finds its template in coursekit/ (a sentence nobody could translate
    otherwise)."""
    from coursekit.catalogue import SelectionError
    from coursekit.errors import Sentence, sentence
    from grader.check.notebook import NotebookError
    from grader.i18n import catalogues

    zh = {"empty range {selection}": "范围 {selection} 是空的", "{option}: {problem}": "{option}：{problem}"}
    monkeypatch.setattr(i18n, "catalogue", lambda lang: zh if lang == "zh" else {})
    said = sentence("empty range {selection}", selection="'04-02'")
    assert str(said) == "empty range '04-02'" and pickle.loads(pickle.dumps(said)) == said
    assert i18n.told(said) == msg("empty range {selection}", selection="'04-02'")
    assert i18n.render(said, "zh") == "范围 '04-02' 是空的"
    inside = msg("{option}: {problem}", option="--lessons", problem=said)
    assert i18n.render(inside, "zh") == "--lessons：范围 '04-02' 是空的"
    refused = SelectionError(said)
    assert str(refused) == "empty range '04-02'" and i18n.render(i18n.said_by(refused), "zh") == "范围 '04-02' 是空的"
    assert i18n.said_by(ValueError("plain")) == "plain" and i18n.said_by(NotebookError("a.ipynb", msg("x"))) == \
        msg("{notebook}: {reason}", notebook="a.ipynb", reason=msg("x"))
    copy = pickle.loads(pickle.dumps(NotebookError("a.ipynb", msg("x"))))
    assert (copy.notebook, copy.reason, str(copy)) == ("a.ipynb", msg("x"), "a.ipynb: x")
    assert catalogues.source_templates()["empty range {selection}"] == ["coursekit/catalogue.py"]
    assert catalogues.ids_in_python('raise E(sentence("a {b} c", b=1))') == ["a {b} c"]
    with pytest.raises(AttributeError):
        said.id = "other"  # type: ignore[misc]
    assert isinstance(said, Sentence) and not isinstance(said, str)
