"""Chinese numeral readings of the integers 0 <= n < 10**8 (the `numerals` dataset).

`to_chinese` writes the reading; `from_chinese` parses it back. The two are written
independently on purpose (the first scans the digit string, the second accumulates over
the characters left to right), so that checking one against the other finds real bugs.

Reading rules (each one is marked `# rule N` where the code applies it):

1. 十 stands alone only at the very start of the whole reading: 十五, 十万, 十万零一十;
   everywhere else it is 一十: 一百一十, 一万零一十.
2. Inside a four-digit group a run of zeros between non-zero digits reads as one 零
   (一千零五 = 1005, 一千零五十 = 1050); trailing zeros read as nothing (一千二百 = 1200).
3. Across the 万 boundary: 零 is read when the lower group is non-zero and under 1000
   (一万零五 = 10005, 一百万零一百 = 1000100), and not when the lower group is 1000 or
   more (一千万一千 = 10001000) or zero (二百万 = 2000000).
4. 二 is used everywhere, never 两 (二千, 二万, 二百万).
5. The range stops below 10**8, so 亿 never appears; 0 is 零.

`from_chinese` accepts exactly the readings `to_chinese` writes and raises ValueError,
with the reason, on anything else (两, a leading 一十, colloquial shortenings such as
一百五 for 150, a missing or extra 零, ...).
"""

DIGIT_CHARS = "零一二三四五六七八九"
PLACE_CHARS = ("", "十", "百", "千")  # the unit after a digit, by its place in a 4-digit group
WAN = "万"
LIMIT = 10**8  # readings are defined for 0 <= n < LIMIT


def _read_group(group: int, starts_reading: bool) -> str:
    """Read 1 <= group <= 9999 on its own, without the leading zeros of its group."""
    digits = str(group)
    out: list[str] = []
    zero_pending = False
    for i, ch in enumerate(digits):
        place = len(digits) - 1 - i
        if ch == "0":
            zero_pending = True  # rule 2: a run of zeros is one 零 ...
            continue
        if zero_pending:
            out.append("零")
            zero_pending = False
        if ch == "1" and place == 1 and starts_reading and not out:
            out.append("十")  # rule 1
        else:
            out.append(DIGIT_CHARS[int(ch)] + PLACE_CHARS[place])
    return "".join(out)  # ... and trailing zeros (still pending here) read as nothing


def to_chinese(n: int) -> str:
    """Return the Chinese reading of 0 <= n < 10**8, e.g. 10005 -> '一万零五'."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"expected an int, got {type(n).__name__}")
    if not 0 <= n < LIMIT:
        raise ValueError(f"{n} is outside 0..{LIMIT - 1} (亿 is not covered)")  # rule 5
    if n == 0:
        return "零"
    high, low = divmod(n, 10_000)
    parts = []
    if high:
        parts.append(_read_group(high, starts_reading=True) + WAN)
    if low:
        if high and low < 1000:
            parts.append("零")  # rule 3
        parts.append(_read_group(low, starts_reading=not high))
    return "".join(parts)


_DIGIT_VALUE = {ch: v for v, ch in enumerate(DIGIT_CHARS) if v}  # 一..九 (零 is handled apart)
_PLACE_OF_UNIT = {"十": 1, "百": 2, "千": 3}


def from_chinese(text: str) -> int:
    """Parse a reading written by `to_chinese` back to its integer, e.g. '一万零五' -> 10005.

    Raises ValueError, saying why, on any string that `to_chinese` would not write.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected a str, got {type(text).__name__}")
    if text == "零":
        return 0
    if not text:
        raise ValueError("empty string is not a numeral")

    def fail(i: int, why: str) -> ValueError:
        return ValueError(f"malformed numeral {text!r} at position {i} ({text[i]!r}): {why}")

    above_wan = 0  # value of the part before 万, times 10000, once 万 is read
    section = 0  # value of the current 4-digit section so far
    digit = None  # a digit read but not yet given its place
    last_place = None  # place (0..3) of the last term in this section; 4 right after 万
    zero_before = False  # a 零 was read since the last term

    def add_term(i: int, value: int, place: int) -> None:
        nonlocal section, last_place, zero_before
        if last_place is not None:
            if place >= last_place:
                raise fail(i, "places must go down (千 > 百 > 十 > ones)")
            skipped = last_place - place > 1
            if skipped and not zero_before:
                raise fail(i, "a skipped place needs 零 (一百零五, not 一百五)")
            if zero_before and not skipped:
                raise fail(i, "零 only stands for skipped places")
        section += value * 10**place
        last_place = place
        zero_before = False

    for i, ch in enumerate(text):
        if ch in _DIGIT_VALUE:
            if digit is not None:
                raise fail(i, "two digits in a row")
            digit = _DIGIT_VALUE[ch]
        elif ch in _PLACE_OF_UNIT:
            if digit is None:
                if not (ch == "十" and i == 0):  # rule 1
                    raise fail(i, "a unit needs a digit before it")
                digit = 1
            elif ch == "十" and digit == 1 and i == 1:
                raise fail(i, "a reading starts with 十, not 一十")  # rule 1
            add_term(i, digit, _PLACE_OF_UNIT[ch])
            digit = None
        elif ch == "零":
            if i == 0 or digit is not None or zero_before:
                raise fail(i, "零 stands only between two non-zero parts, once")
            zero_before = True
        elif ch == WAN:
            if digit is not None:
                add_term(i, digit, 0)
                digit = None
            if zero_before:
                raise fail(i, "零 cannot come right before 万")
            if above_wan or section == 0:
                raise fail(i, "万 must follow a non-zero number and appear once")
            above_wan, section, last_place = section * 10_000, 0, 4  # rule 3 via place 4
        elif ch == "两":
            raise fail(i, "this corpus writes 二, never 两")  # rule 4
        else:
            raise fail(i, "not a character of a numeral below 亿")  # rule 5
    if digit is not None:
        add_term(len(text) - 1, digit, 0)
    if zero_before:
        raise fail(len(text) - 1, "trailing zeros read as nothing, not 零")
    return above_wan + section
