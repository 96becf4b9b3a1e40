"""MLIR's `--split-input-file` convention: a `// -----` line separates the test cases of one
file. Each chunk is padded with the blank lines before it, so that a diagnostic's line number
in a chunk is its line in the file."""

import re
from typing import NamedTuple

SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", re.MULTILINE)


class Chunk(NamedTuple):
    """A piece of the input (padded) and the line of the file it starts on."""

    first_line: int
    text: str


def split_chunks(text: str) -> list[Chunk]:
    chunks, line = [], 1
    for piece in SPLIT_MARKER.split(text):
        chunks.append(Chunk(line, "\n" * (line - 1) + piece))
        line += piece.count("\n")
    return chunks
