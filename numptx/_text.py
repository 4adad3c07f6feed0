"""Small text helpers shared by the PTX and C readers."""
from __future__ import annotations


def split_top(text: str, opens: str = "([{", closes: str = ")]}") -> list[str]:
    """``text`` split at the commas outside brackets, each part stripped.

    >>> split_top("%f1, {%f2, %f3}, [%rd1]")
    ['%f1', '{%f2, %f3}', '[%rd1]']
    """
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts
