"""A POSIX shell lexer for the launch reader: words that remember how they were quoted.

Pure: no Pulumi import. The launch reader (:mod:`serving.launch.vllm_argv`) accepts only a small,
stated grammar (docs/reader-grammar.md); this module splits a script into its commands and
each word into parts (literal text, quoted or not, and `$NAME`/`${NAME}` references), so the
reader can tell `"$X"` (one word) from `$X` (word-split and globbed by the shell), and refuse,
naming it, every construct it does not follow: command substitution, arithmetic, parameter
operators (`${X:-y}`), special parameters, ANSI-C quoting, here-documents, process
substitution, brace and tilde expansion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class ShellError(ValueError):
    """A construct outside the reader's grammar; the message names it."""


@dataclass(frozen=True)
class Part:
    """A piece of a word: literal text, or a variable reference (`name` set)."""

    text: str
    #: Inside single or double quotes (or escaped with a backslash): no splitting, no globbing.
    quoted: bool
    #: `$NAME` / `${NAME}`: the variable it refers to (`text` is how it was written).
    name: str | None = None


@dataclass(frozen=True)
class Word:
    parts: tuple[Part, ...]

    @property
    def raw(self) -> str:
        return "".join(p.text for p in self.parts)

    @property
    def literal(self) -> str | None:
        """The word's text when it refers to no variable."""
        if any(p.name for p in self.parts):
            return None
        return "".join(p.text for p in self.parts)


@dataclass
class Command:
    """One simple command: its words, and the operator that ends it."""

    words: list[Word] = field(default_factory=list)
    #: `;`, `\n`, `&`, `&&`, `||`, `|`, `|&`, or "" at the end of the script.
    end: str = ""
    #: The operator before it ("" for the first command of a line or after `;`/`&`).
    after: str = ""
    #: Redirection operators it carries (`>`, `2>&1`...).
    redirections: list[str] = field(default_factory=list)
    #: The target word of each redirection, in the same order.
    targets: list[Word] = field(default_factory=list)


#: Characters a shell globs with when they are unquoted.
GLOB_CHARS = frozenset("*?[")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "(", ")")
_REDIRECT = re.compile(r"(\d*)(&>>|&>|>>|>&|>\||<&|<>|>|<)")
#: Bounds: a startup script is kilobytes; anything far larger is refused, not read.
MAX_SCRIPT_CHARS = 256 * 1024
MAX_WORDS = 20_000


def _refuse(what: str) -> ShellError:
    return ShellError(what)


def lex(script: str) -> list[Command]:
    """Split a script into simple commands (words keep their quoting).

    Raises ShellError, naming the construct, for anything outside the grammar.
    """
    if len(script) > MAX_SCRIPT_CHARS:
        raise _refuse(f"a script of {len(script)} characters (at most {MAX_SCRIPT_CHARS})")
    text = script.replace("\r\n", "\n")
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text):
        raise _refuse("the script contains control characters")
    commands: list[Command] = []
    current = Command()
    parts: list[Part] = []
    in_word = False
    i = 0
    n = len(text)
    count = 0

    def end_word() -> None:
        nonlocal parts, in_word, count
        if in_word:
            current.words.append(Word(tuple(parts)))
            count += 1
            if count > MAX_WORDS:
                raise _refuse(f"more than {MAX_WORDS} words")
        parts = []
        in_word = False

    def end_command(operator: str) -> None:
        nonlocal current
        end_word()
        if current.words or current.redirections:
            current.end = operator
            commands.append(current)
            current = Command(after=operator if operator in ("&&", "||", "|", "|&") else "")
        elif operator in ("&&", "||", "|", "|&", "&", ";"):
            raise _refuse(f"an operator {operator!r} with no command before it")

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2  # line continuation
            continue
        if c in " \t":
            end_word()
            i += 1
            continue
        if c == "\n":
            end_command("\n")
            i += 1
            continue
        if c == "#" and not in_word:
            while i < n and text[i] != "\n":
                i += 1
            continue
        if in_word and c in "<>":
            end_word()
            continue
        if not in_word:
            redirect = _REDIRECT.match(text, i)
            if redirect and (redirect.group(1) or not text.startswith("&&", i)):
                op = redirect.group(2)
                if text.startswith("<<", i + len(redirect.group(1))):
                    raise _refuse("a here-document or here-string (<<)")
                if op in ("<", ">") and text.startswith("(", redirect.end()):
                    raise _refuse(f"process substitution ({op}(...))")
                current.redirections.append(redirect.group(0))
                i = redirect.end()
                # The target is the next word; it is read and dropped.
                while i < n and text[i] in " \t":
                    i += 1
                target: list[Part] = []
                i = _word(text, i, target)
                if not target:
                    raise _refuse(f"a redirection {redirect.group(0)!r} without a target")
                current.targets.append(Word(tuple(target)))
                continue
        operator = next((op for op in _OPERATORS if text.startswith(op, i)), None)
        if operator is not None:
            if operator in ("(", ")"):
                raise _refuse("a subshell or grouping with parentheses")
            if operator == ";;":
                raise _refuse("a `case` statement (;;)")
            end_command(operator)
            i += len(operator)
            continue
        in_word = True
        i = _word(text, i, parts)
    end_command("")
    if commands and commands[-1].end in ("&&", "||", "|", "|&"):
        raise _refuse(f"an operator {commands[-1].end!r} with no command after it")
    return commands


def _word(text: str, i: int, parts: list[Part]) -> int:
    """Read one word's parts from `i` into `parts`; the index after it."""
    n = len(text)
    while i < n:
        c = text[i]
        if c in " \t\n;&|()<>":
            break
        if c == "\\":
            if i + 1 >= n:
                raise _refuse("a backslash at the end of the script")
            if text[i + 1] != "\n":  # backslash-newline joins the lines
                parts.append(Part(text[i + 1], True))
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise _refuse("an unbalanced single quote")
            parts.append(Part(text[i + 1 : end], True))
            i = end + 1
        elif c == '"':
            i = _double_quoted(text, i + 1, parts)
        elif c == "$":
            i = _dollar(text, i, parts, quoted=False)
        elif c == "`":
            raise _refuse("command substitution with backquotes")
        else:
            if c == "~":
                # bash expands `~` at a word's start and after `=` or `:` in assignments.
                raise _refuse("tilde expansion (~)")
            if c == "{" and re.match(r"\{[^{}\s]*(,|\.\.)[^{}\s]*\}", text[i:]):
                raise _refuse("brace expansion ({a,b} or {1..3})")
            parts.append(Part(c, False))
            i += 1
    return i


def _double_quoted(text: str, i: int, parts: list[Part]) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            if not parts:
                parts.append(Part("", True))  # `""` is a word, empty
            return i + 1
        if c == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                parts.append(Part(text[i + 1], True))
            i += 2
        elif c == "$":
            i = _dollar(text, i, parts, quoted=True)
        elif c == "`":
            raise _refuse("command substitution with backquotes")
        else:
            parts.append(Part(c, True))
            i += 1
    raise _refuse("an unbalanced double quote")


def _dollar(text: str, i: int, parts: list[Part], *, quoted: bool) -> int:
    rest = text[i + 1 :]
    if rest.startswith("(("):
        raise _refuse("arithmetic expansion $((...))")
    if rest.startswith("("):
        raise _refuse("command substitution $(...)")
    if rest.startswith("'") and not quoted:
        raise _refuse("ANSI-C quoting $'...'")
    if rest.startswith('"') and not quoted:
        raise _refuse('locale quoting $"..."')
    if rest.startswith("["):
        raise _refuse("arithmetic expansion $[...]")
    if rest.startswith("{"):
        close = rest.find("}")
        inner = rest[1:close] if close > 0 else ""
        if close < 0 or not _NAME.fullmatch(inner):
            shown = "${" + (inner if close >= 0 else rest[1:20])[:30] + "}"
            raise _refuse(f"the parameter expansion {shown} (only ${{NAME}} and $NAME are read)")
        parts.append(Part("${" + inner + "}", quoted, inner))
        return i + 2 + close
    match = _NAME.match(rest)
    if match:
        parts.append(Part("$" + match.group(0), quoted, match.group(0)))
        return i + 1 + match.end()
    if rest[:1] and (rest[0].isdigit() or rest[0] in "@*#?-$!"):
        raise _refuse(f"the special parameter ${rest[0]}")
    parts.append(Part("$", quoted))  # a lone `$` is literal
    return i + 1
