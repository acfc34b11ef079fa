"""What counts as the same Orb text: differences nobody can see are not differences.

A browser's textarea sends line breaks as \r\n, an editor leaves spaces at line ends, and the same
accented letter can be one code point or two. Text is normalised before it is hashed into an Orb's
content id or compared with a stored Orb's, so none of these make a new revision or a second Orb.
"""
import unicodedata


def content_normalise(text: str) -> str:
    """Unicode NFC, \n line breaks, no whitespace at line ends, none before or after the text."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()
