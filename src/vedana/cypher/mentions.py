"""What a Cypher query names, read from its tokens with the scope of its variables: the labels
and relationship types it writes, the properties it reads from variables bound in its patterns,
and the hops its patterns draw between nodes.

One pass over the tokens of `vedana.cypher.text`, keeping a stack of brackets (each a frame:
a node or relationship pattern, a map, a map projection, a subquery, a list, a call) and, per
statement, the variables in scope. A variable is one `Var` object for as long as it is in scope,
so every pattern that names it adds to what is known of it. What cannot be told is left unknown
rather than guessed: a variable from UNWIND, YIELD, a comprehension or an expression is bound
to nothing, so nothing about it is checked. WITH keeps only what it projects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vedana.cypher.text import MalformedCypher, Token, tokenize

# Words that start a clause of a statement (compared folded).
CLAUSES = frozenset(
    {"match", "optional", "where", "with", "return", "unwind", "call", "yield", "order", "skip", "limit"}
    | {"union", "create", "merge", "set", "delete", "detach", "remove", "foreach", "load", "using"}
)
PATTERN_CLAUSES = frozenset({"match", "optional", "create", "merge"})
# `word {` opens a subquery after these words; after other keywords it is a map literal.
SUBQUERY_WORDS = frozenset({"call", "exists", "count", "collect"})
EXPRESSION_WORDS = frozenset(
    {"return", "with", "where", "and", "or", "xor", "not", "in", "as", "then", "else", "when", "case"}
    | {"distinct", "by", "contains", "starts", "ends", "is", "unwind", "set", "yield", "null"}
)
AS, IN, DISTINCT, WHERE = (frozenset({w}) for w in ("as", "in", "distinct", "where"))
# Joins the names of a label expression: `:A:B`, `:A|B`, `:A&B`, `:!A`.
LABEL_JOINERS = frozenset({":", "|", "&", "!"})


@dataclass(eq=False)
class Var:
    """One variable while it is in scope: a node, a relationship, or something else."""

    kind: str  # "node", "rel" or "other"
    names: set[str] = field(default_factory=set)  # labels or types written for it
    inferred: set[str] = field(default_factory=set)  # labels its relationships imply

    def add(self, kind: str, names: tuple[str, ...]) -> None:
        if kind != self.kind:
            self.kind = "other"  # a name used as two kinds of thing: tell nothing
        self.names.update(names)


@dataclass(frozen=True)
class Name:
    """A label or relationship type as written, with where it starts in the query."""

    text: str
    at: int


@dataclass(frozen=True)
class PropertyUse:
    var: Var
    key: str
    at: int


@dataclass(frozen=True)
class NodeRef:
    var: Var
    labels: tuple[str, ...]  # written in this pattern
    start: int  # the pattern's text span
    end: int


@dataclass
class Hop:
    """`(left)-[:T]->(right)`: one relationship pattern between two node patterns."""

    types: tuple[str, ...]
    arrow: str  # "->", "<-" or "" (either way)
    variable_length: bool
    start: int  # the text span of `[...]`
    end: int
    left: NodeRef | None = None
    right: NodeRef | None = None


@dataclass
class Mentions:
    labels: list[Name] = field(default_factory=list)
    types: list[Name] = field(default_factory=list)
    properties: list[PropertyUse] = field(default_factory=list)
    hops: list[Hop] = field(default_factory=list)


@dataclass(eq=False)
class Frame:
    """An open bracket, or the whole query. Statement frames (the query, a subquery) hold the
    variables in scope and the clause being read; the others may hold comprehension locals."""

    kind: str  # "statement", "node", "rel", "props", "projection", "map", "list", "paren"
    close: int  # index of the closing token
    vars: dict[str, Var] = field(default_factory=dict)
    clause: str = ""
    owner: Var | None = None  # the variable a pattern, its property map or a projection is about
    projection: tuple[str, int] | None = None  # ("with" | "return" | "yield", index after it)
    returned: list[str] = field(default_factory=list)  # a subquery's RETURN names
    imports: dict[str, Var] = field(default_factory=dict)  # what a subquery was given


def read_mentions(query: str) -> Mentions | None:
    """What `query` names, or None when it cannot be read (the read-only guard reports that)."""
    try:
        tokens = tokenize(query)
    except MalformedCypher:
        return None
    partners = _partners(tokens)
    if partners is None:
        return None
    return _Reader(query, tokens, partners).read()


def _partners(tokens: list[Token]) -> dict[int, int] | None:
    """Each opening bracket's index -> its closing bracket's index; None if they do not pair."""
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    found: dict[int, int] = {}
    for k, tok in enumerate(tokens):
        if tok.kind != "punct":
            continue
        if tok.text in "([{":
            stack.append(k)
        elif tok.text in pairs:
            if not stack or tokens[stack[-1]].text != pairs[tok.text]:
                return None
            found[stack.pop()] = k
    return None if stack else found


class _Reader:
    def __init__(self, query: str, tokens: list[Token], partners: dict[int, int]) -> None:
        self.query, self.tokens, self.partners = query, tokens, partners
        self.found = Mentions()
        self.frames = [Frame("statement", len(tokens))]
        self.nodes_by_open: dict[int, NodeRef] = {}
        self.nodes_by_close: dict[int, NodeRef] = {}
        self.pending_hops: list[tuple[Hop, int, int]] = []  # hop, left node's close, right node's open
        self.label_end = -1  # the colons of a label expression already read

    # -- tokens ------------------------------------------------------------------------------
    def tok(self, k: int) -> Token | None:
        return self.tokens[k] if 0 <= k < len(self.tokens) else None

    def is_punct(self, k: int, text: str) -> bool:
        tok = self.tok(k)
        return tok is not None and tok.kind == "punct" and tok.text == text

    def is_word(self, k: int, words: frozenset[str] | None = None) -> bool:
        tok = self.tok(k)
        return tok is not None and tok.kind == "word" and (words is None or tok.text in words)

    def is_name(self, k: int) -> bool:
        tok = self.tok(k)
        return tok is not None and tok.kind in {"word", "name"}

    def raw(self, k: int) -> str:
        """A word as written (tokens hold words folded) or a backticked name's content."""
        tok = self.tokens[k]
        return tok.text if tok.kind == "name" else self.query[tok.start : tok.end]

    def is_keyword(self, k: int, words: frozenset[str]) -> bool:
        """A keyword, not a property key (`n.limit`) or a procedure part (`db.labels`)."""
        return self.is_word(k, words) and not self.is_punct(k - 1, ".")

    # -- scope -------------------------------------------------------------------------------
    def statement(self) -> Frame:
        return next(f for f in reversed(self.frames) if f.kind == "statement")

    def lookup(self, name: str) -> Var | None:
        for frame in reversed(self.frames):
            if name in frame.vars:
                return frame.vars[name]
            if frame.kind == "statement":
                return None
        return None

    def pattern_home(self) -> Frame:
        """Where a new pattern variable lives: the statement, unless the pattern is inside a
        list (a pattern comprehension), whose variables are its own."""
        for frame in reversed(self.frames):
            if frame.kind in {"statement", "list"}:
                return frame
        return self.frames[0]

    def bind(self, name: str | None, kind: str, names: tuple[str, ...]) -> Var:
        if name is None:
            return Var(kind, set(names))
        var = self.lookup(name)
        if var is None:
            var = self.pattern_home().vars.setdefault(name, Var(kind))
        var.add(kind, names)
        return var

    # -- the pass ----------------------------------------------------------------------------
    def read(self) -> Mentions:
        for k in range(len(self.tokens)):
            self.step(k)
        self.end_projection(self.frames[0], len(self.tokens))
        self.link_hops()
        return self.found

    def step(self, k: int) -> None:
        tok = self.tokens[k]
        frame = self.frames[-1]
        if tok.kind == "punct" and tok.text in "([{":
            self.open(k)
        elif tok.kind == "punct" and tok.text in ")]}":
            self.closing(k)
        elif tok.kind == "punct" and tok.text == ":" and k >= self.label_end:
            self.colon(k)
        elif tok.kind == "punct" and tok.text == ".":
            self.dot(k)
        elif frame.kind == "statement" and self.is_keyword(k, CLAUSES):
            self.clause(k, frame)
        elif (
            frame.kind == "statement"
            and frame.clause == "unwind"
            and self.is_keyword(k, AS)
            and self.is_name(k + 1)
        ):
            frame.vars[self.raw(k + 1)] = Var("other")  # `UNWIND list AS x`: x holds something unknown

    # -- brackets ----------------------------------------------------------------------------
    def open(self, k: int) -> None:
        close = self.partners[k]
        text = self.tokens[k].text
        if text == "(":
            frame = self.node_pattern(k, close) or Frame("paren", close)
        elif text == "[":
            frame = self.rel_pattern(k, close) or Frame("list", close)
        else:
            frame = self.brace(k, close)
        self.frames.append(frame)
        if frame.kind in {"paren", "list"}:
            self.comprehension_locals(k, frame)

    def closing(self, k: int) -> None:
        frame = self.frames[-1]
        if frame.close != k:
            return
        if frame.kind == "statement":
            self.end_projection(frame, k)
        self.frames.pop()
        if frame.kind == "statement":
            outer = self.statement()
            for name in frame.returned:  # CALL { ... RETURN x }: x is known outside, as nothing
                outer.vars[name] = Var("other")

    def brace(self, k: int, close: int) -> Frame:
        frame = self.frames[-1]
        if frame.kind in {"node", "rel"}:
            return Frame("props", close, owner=frame.owner)
        if self.is_keyword(k - 1, SUBQUERY_WORDS):
            seen = self.visible()
            return Frame("statement", close, vars=dict(seen), imports=seen)
        if self.is_name(k - 1) and not self.is_word(k - 1, EXPRESSION_WORDS | CLAUSES):
            return Frame("projection", close, owner=self.lookup(self.raw(k - 1)))
        return Frame("map", close)

    def visible(self) -> dict[str, Var]:
        """The variables a subquery starts with: all those in scope where it opens."""
        seen: dict[str, Var] = {}
        for frame in self.frames:
            seen = dict(frame.vars) if frame.kind == "statement" else {**seen, **frame.vars}
        return seen

    def comprehension_locals(self, k: int, frame: Frame) -> None:
        """`[x IN list ...]`, `any(x IN ...)`, `reduce(acc = 0, x IN ... | ...)`: x and acc are
        the bracket's own, bound to nothing known."""
        item_start, j = True, k + 1
        while j < frame.close:
            local = self.is_keyword(j + 1, IN) or self.is_punct(j + 1, "=")
            if item_start and self.is_name(j) and local:
                frame.vars[self.raw(j)] = Var("other")
            item_start = self.is_punct(j, ",")
            j = self.partners.get(j, j) + 1

    # -- patterns ----------------------------------------------------------------------------
    def node_pattern(self, k: int, close: int) -> Frame | None:
        """`(var:Label {...})` where a pattern may stand: in a pattern clause, or next to a
        relationship. Binds the variable; None when the parentheses are something else."""
        in_clause = self.frames[-1].kind == "statement" and self.frames[-1].clause in PATTERN_CLAUSES
        if not (in_clause or self.beside_relationship(k, close)):
            return None
        j, name = k + 1, None
        if self.is_name(j) and not self.is_punct(j + 1, "("):
            name, j = self.raw(j), j + 1
        labels: tuple[str, ...] = ()
        if self.is_punct(j, ":"):
            labels, j = self.label_names(j + 1, allow_bar=True)
        if self.is_punct(j, "{"):
            j = self.partners[j] + 1
        if j != close and not self.is_word(j, WHERE):
            return None
        var = self.bind(name, "node", labels)
        ref = NodeRef(var, labels, self.tokens[k].start, self.tokens[close].end)
        self.nodes_by_open[k], self.nodes_by_close[close] = ref, ref
        return Frame("node", close, owner=var)

    def beside_relationship(self, k: int, close: int) -> bool:
        """Parentheses that end or start a relationship: `]-(`, `-->(`, `)-[`, `)<-`, `)--`."""
        before = (self.is_punct(k - 1, "-") and (self.is_punct(k - 2, "]") or self.is_punct(k - 2, "-"))) or (
            self.is_punct(k - 1, ">") and self.is_punct(k - 2, "-")
        )
        after = (
            self.is_punct(close + 1, "-") and (self.is_punct(close + 2, "[") or self.is_punct(close + 2, "-"))
        ) or (self.is_punct(close + 1, "<") and self.is_punct(close + 2, "-"))
        return before or after

    def rel_pattern(self, k: int, close: int) -> Frame | None:
        """`-[var:TYPE|OTHER*1..3 {...}]->`: binds the variable and notes the hop."""
        if not (self.is_punct(k - 1, "-") and self.is_punct(close + 1, "-")):
            return None
        j, name = k + 1, None
        if self.is_name(j) and not self.is_punct(j + 1, "("):
            name, j = self.raw(j), j + 1
        types: tuple[str, ...] = ()
        if self.is_punct(j, ":"):
            types, j = self.label_names(j + 1, allow_bar=True)
        variable_length = self.has_star(j, close)
        var = self.bind(name, "other" if variable_length else "rel", types)
        arrow_left, arrow_right = self.is_punct(k - 2, "<"), self.is_punct(close + 2, ">")
        arrow = {(False, True): "->", (True, False): "<-"}.get((arrow_left, arrow_right), "")
        hop = Hop(types, arrow, variable_length, self.tokens[k].start, self.tokens[close].end)
        self.pending_hops.append(
            (hop, k - 3 if arrow_left else k - 2, close + 3 if arrow_right else close + 2)
        )
        return Frame("rel", close, owner=var)

    def has_star(self, j: int, close: int) -> bool:
        """A `*` (variable length) among the bracket's own tokens, not inside its property map."""
        while j < close:
            if self.is_punct(j, "*"):
                return True
            j = self.partners.get(j, j) + 1
        return False

    def label_names(self, j: int, *, allow_bar: bool) -> tuple[tuple[str, ...], int]:
        """The names of a label expression starting at `j` (after its colon) and the index
        after it: `A:B`, `A|B`, `A|:B`, `A&B`, `!A`. `|` joins names only where it cannot be a
        comprehension's bar."""
        names: list[str] = []
        expect_name = True
        joiners = LABEL_JOINERS if allow_bar else LABEL_JOINERS - {"|"}
        while j < len(self.tokens):
            tok = self.tokens[j]
            punct = tok.text if tok.kind == "punct" else ""
            if expect_name and tok.kind in {"word", "name"}:
                names.append(self.raw(j))
                expect_name = False
            elif (
                punct == "!"
                or (not expect_name and punct in joiners)
                or (expect_name and names and punct == ":")
            ):
                expect_name = True
            else:
                break
            j += 1
        return tuple(n for n in names if not n.startswith("$")), j

    # -- names and properties ----------------------------------------------------------------
    def colon(self, k: int) -> None:
        frame = self.frames[-1]
        key_before = self.is_name(k - 1) and (self.is_punct(k - 2, "{") or self.is_punct(k - 2, ","))
        if frame.kind in {"props", "projection", "map"} and key_before:
            if frame.kind == "props":  # a key of a pattern's property map is a property
                self.use(frame.owner, k - 1)
            return
        names, self.label_end = self.label_names(k + 1, allow_bar=frame.kind != "list")
        target = self.found.types if frame.kind == "rel" else self.found.labels
        at = self.tokens[k + 1].start if k + 1 < len(self.tokens) else self.tokens[k].end
        target.extend(Name(n, at) for n in names)

    def dot(self, k: int) -> None:
        frame = self.frames[-1]
        key = k + 1
        if not self.is_name(key) or self.is_punct(key + 1, "("):
            return  # `.*`, a number's fraction, or a function such as date.truncate(...)
        if frame.kind == "projection" and (self.is_punct(k - 1, "{") or self.is_punct(k - 1, ",")):
            self.use(frame.owner, key)  # `p {.name}`
        elif self.is_name(k - 1) and not self.is_punct(k - 2, "."):
            self.use(self.lookup(self.raw(k - 1)), key)  # not `f(x).key` nor `a.b.c`

    def use(self, var: Var | None, key: int) -> None:
        if var is not None and var.kind in {"node", "rel"}:
            self.found.properties.append(PropertyUse(var, self.raw(key), self.tokens[key].start))

    # -- clauses and scope -------------------------------------------------------------------
    def clause(self, k: int, frame: Frame) -> None:
        """A clause word: it ends the item list of a WITH, RETURN or YIELD before it."""
        word = self.tokens[k].text
        self.end_projection(frame, k)
        if word == "union":
            frame.vars = dict(frame.imports)
        if word in {"with", "return", "yield"}:
            frame.projection = (word, k + 1)
        if word == "where":
            frame.clause = "where" if frame.clause in PATTERN_CLAUSES else frame.clause
        elif word not in {"order", "skip", "limit"}:
            frame.clause = "match" if word == "optional" else word

    def end_projection(self, frame: Frame, end: int) -> None:
        """WITH keeps only what it projects (`x`, `x AS y`, `*`); RETURN and YIELD add their
        names (YIELD's as unknown)."""
        if frame.projection is None:
            return
        word, start = frame.projection
        frame.projection = None
        projected: dict[str, Var] = {}
        for item in self.items(start, end):
            name, var = self.projected(item, word)
            if name is not None:
                projected[name] = var
        if word == "with":
            keep_all = any(len(item) == 1 and self.is_punct(item[0], "*") for item in self.items(start, end))
            frame.vars = {**frame.vars, **projected} if keep_all else projected
        else:
            frame.vars.update(projected)
            frame.returned = list(projected) if word == "return" else frame.returned

    def projected(self, item: list[int], word: str) -> tuple[str | None, Var]:
        """The name one projection item binds and what it holds: `x` and `x AS y` pass x on."""
        if len(item) >= 3 and self.is_keyword(item[-2], AS) and self.is_name(item[-1]):
            source = item[:-2]
        elif self.is_name(item[-1]) and (len(item) == 1 or word == "yield"):
            source = item[-1:]
        else:
            return None, Var("other")
        name = self.raw(item[-1])
        passed = self.lookup(self.raw(source[0])) if len(source) == 1 and self.is_name(source[0]) else None
        return name, (passed if passed is not None and word != "yield" else Var("other"))

    def items(self, start: int, end: int) -> list[list[int]]:
        """The token indexes of each comma-separated item between `start` and `end` (a bracket
        stands for itself and all it holds)."""
        if self.is_keyword(start, DISTINCT):
            start += 1
        found: list[list[int]] = [[]]
        j = start
        while j < end:
            if self.is_punct(j, ","):
                found.append([])
            else:
                found[-1].append(j)
            j = self.partners.get(j, j) + 1
        return [item for item in found if item]

    # -- hops ------------------------------------------------------------------------------------
    def link_hops(self) -> None:
        for hop, left_close, right_open in self.pending_hops:
            hop.left = self.nodes_by_close.get(left_close)
            hop.right = self.nodes_by_open.get(right_open)
            self.found.hops.append(hop)
