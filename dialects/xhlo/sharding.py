"""XLA's HloSharding: a dataclass, a parser and a printer of XLA's text syntax, validation.

The `xhlo.sharding` attribute stays a string in XLA's syntax; `HloSharding.parse` reads it
and `str(sharding)` prints it canonically. The forms (XLA's `HloSharding::Print`):

    {replicated}  {manual}  {unknown}  {maximal device=3}
    {devices=[2,1]0,1}                          tiled, explicit device list (row-major)
    {devices=[2,2]<=[4]}                        tiled, iota device list
    {devices=[2,2]<=[2,2]T(1,0)}                iota reshaped to [2,2], transposed by (1,0)
    {devices=[2,1,2]<=[4] last_tile_dim_replicate}   last tile dim is a replication group
    {devices=[1,2,2,2]<=[8] last_tile_dims={manual, replicated}}   last dims are subgroups
    {{replicated}, {maximal device=0}}          tuple: one sharding per leaf (per result)

`metadata={...}` (and a shard group `shard_as N` / `shard_like N`) is accepted and dropped.

Semantics used by validation (XLA's `HloSharding::ValidateNonTuple`): a tiled sharding's
tile assignment has one dimension per data dimension plus one per subgroup (the replicated
last dim, the `last_tile_dims` types); it must hold product(dims) distinct non-negative
device ids, more than one; the data rank must equal the value's rank; with a known device
count every id must be below it. Iota device lists canonicalize like XLA's
`IotaTileAssignment`: size-1 dims drop, dims that stay adjacent after the transpose merge,
and an identity transpose prints as `<=[N]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from mlirxla.mlir import ir

SUBGROUP_TYPES = ("manual", "replicated", "maximal", "unreduced")


class ShardingSyntaxError(ValueError):
    """The text is not an HloSharding in XLA's syntax."""


@dataclass(frozen=True)
class Iota:
    """`<=[reshape_dims]T(perm)`: iota(prod) reshaped to `reshape_dims`, transposed by `perm`."""

    reshape_dims: tuple[int, ...]
    perm: tuple[int, ...] | None = None

    def devices(self) -> np.ndarray:
        size = int(np.prod(self.reshape_dims, dtype=np.int64)) if self.reshape_dims else 1
        array = np.arange(size, dtype=np.int64).reshape(self.reshape_dims or (1,))
        if self.perm is not None and self.reshape_dims:
            array = array.transpose(self.perm)
        return array.reshape(-1)

    def canonical(self) -> "Iota":
        """Drop size-1 dims, merge dims adjacent both before and after the transpose."""
        dims = list(self.reshape_dims)
        perm = list(self.perm) if self.perm is not None else list(range(len(dims)))
        keep = [i for i, d in enumerate(dims) if d != 1]
        renumber = {old: new for new, old in enumerate(keep)}
        dims = [dims[i] for i in keep]
        perm = [renumber[p] for p in perm if p in renumber]
        # merge runs in the transposed order whose source dims are consecutive
        groups: list[list[int]] = []
        for p in perm:
            if groups and groups[-1][-1] + 1 == p:
                groups[-1].append(p)
            else:
                groups.append([p])
        order = sorted(range(len(groups)), key=lambda g: groups[g][0])
        merged_dims = [int(np.prod([dims[i] for i in groups[g]])) for g in order]
        position = {g: new for new, g in enumerate(order)}
        merged_perm = [position[g] for g in range(len(groups))]
        if merged_perm == sorted(merged_perm):
            total = int(np.prod(merged_dims)) if merged_dims else 1
            return Iota((total,), None)
        return Iota(tuple(merged_dims), tuple(merged_perm))

    def __str__(self) -> str:
        text = "<=[" + ",".join(str(d) for d in self.reshape_dims) + "]"
        if self.perm is not None:
            text += "T(" + ",".join(str(p) for p in self.perm) + ")"
        return text


@dataclass(frozen=True)
class HloSharding:
    """One HloSharding. `kind` is replicated, manual, unknown, maximal, tiled or tuple."""

    kind: str
    device: int | None = None  # maximal
    tile_dims: tuple[int, ...] = ()  # tiled: the tile assignment's dims (with subgroup dims)
    device_list: tuple[int, ...] | None = None  # tiled, explicit
    iota: Iota | None = None  # tiled, iota
    last_tile_dim_replicate: bool = False
    subgroup_types: tuple[str, ...] = ()  # `last_tile_dims={...}`
    elements: tuple["HloSharding", ...] = field(default=())  # tuple

    # ------------------------------------------------------------ constructors

    @staticmethod
    def replicated() -> "HloSharding":
        return HloSharding("replicated")

    @staticmethod
    def manual() -> "HloSharding":
        return HloSharding("manual")

    @staticmethod
    def unknown() -> "HloSharding":
        return HloSharding("unknown")

    @staticmethod
    def maximal(device: int) -> "HloSharding":
        return HloSharding("maximal", device=device)

    @staticmethod
    def tuple_of(elements) -> "HloSharding":
        return HloSharding("tuple", elements=tuple(elements))

    @staticmethod
    def tiled(tile_dims, devices=None, iota: Iota | None = None, last_tile_dim_replicate=False, subgroup_types=()) -> "HloSharding":
        """A tiled sharding; `last_tile_dims={replicated}` alone becomes `last_tile_dim_replicate`."""
        subgroup_types = tuple(subgroup_types)
        if subgroup_types == ("replicated",):
            subgroup_types, last_tile_dim_replicate = (), True
        if iota is not None:
            iota = iota.canonical()
        return HloSharding(
            "tiled",
            tile_dims=tuple(int(d) for d in tile_dims),
            device_list=None if devices is None else tuple(int(d) for d in devices),
            iota=iota,
            last_tile_dim_replicate=last_tile_dim_replicate,
            subgroup_types=subgroup_types,
        )

    @staticmethod
    def parse(text: str) -> "HloSharding":
        return _Parser(text).parse()

    # ------------------------------------------------------------ queries

    def devices(self) -> np.ndarray:
        """The tile assignment of a tiled sharding, flattened row-major."""
        if self.iota is not None:
            flat = self.iota.devices()
        else:
            flat = np.array(self.device_list or (), dtype=np.int64)
        return flat

    @property
    def subgroup_count(self) -> int:
        return (1 if self.last_tile_dim_replicate else 0) + len(self.subgroup_types)

    @property
    def data_rank(self) -> int:
        """Number of tile dims that tile data (XLA's TiledDataRank)."""
        return len(self.tile_dims) - self.subgroup_count

    def leaves(self) -> tuple["HloSharding", ...]:
        return self.elements if self.kind == "tuple" else (self,)

    def __str__(self) -> str:
        if self.kind == "tuple":
            return "{" + ", ".join(str(e) for e in self.elements) + "}"
        if self.kind in ("replicated", "manual", "unknown"):
            return "{" + self.kind + "}"
        if self.kind == "maximal":
            return f"{{maximal device={self.device}}}"
        text = "{devices=[" + ",".join(str(d) for d in self.tile_dims) + "]"
        if self.iota is not None:
            text += str(self.iota)
        else:
            text += ",".join(str(d) for d in self.device_list or ())
        if self.last_tile_dim_replicate:
            text += " last_tile_dim_replicate"
        if self.subgroup_types:
            text += " last_tile_dims={" + ", ".join(self.subgroup_types) + "}"
        return text + "}"

    # ------------------------------------------------------------ validation

    def problem(self, ranks: list[int | None] | None = None, device_count: int | None = None) -> str | None:
        """None when valid; else a sentence. `ranks`: the ranks of the values it applies to, when known."""
        if self.kind == "tuple":
            if ranks is not None and len(ranks) != len(self.elements):
                return f"tuple sharding {self} has {len(self.elements)} elements for {len(ranks)} values"
            for index, element in enumerate(self.elements):
                if element.kind == "tuple":
                    return f"nested tuple sharding {element} (element {index})"
                rank = None if ranks is None else ranks[index]
                if problem := element.problem([rank], device_count):
                    return f"tuple element {index}: {problem}"
            return None
        if self.kind == "maximal":
            if self.device < 0:
                return f"device {self.device} is negative in {self}"
            if device_count is not None and self.device >= device_count:
                return f"device {self.device} is not below the device count {device_count} in {self}"
            return None
        if self.kind != "tiled":
            return None
        if any(d <= 0 for d in self.tile_dims):
            return f"tile dimensions {list(self.tile_dims)} must be positive in {self}"
        if self.data_rank < 0:
            return f"{self.subgroup_count} subgroup dimensions but only {len(self.tile_dims)} tile dimensions in {self}"
        size = int(np.prod(self.tile_dims, dtype=np.int64))
        if self.iota is not None:
            iota_size = int(np.prod(self.iota.reshape_dims, dtype=np.int64))
            if self.iota.perm is not None and sorted(self.iota.perm) != list(range(len(self.iota.reshape_dims))):
                return f"iota transpose {list(self.iota.perm)} is not a permutation of {len(self.iota.reshape_dims)} dimensions in {self}"
            if iota_size != size:
                return f"iota device list has {iota_size} devices but the tile dimensions {list(self.tile_dims)} need {size} in {self}"
        elif len(self.device_list or ()) != size:
            return f"{len(self.device_list or ())} devices listed but the tile dimensions {list(self.tile_dims)} need {size} in {self}"
        devices = [int(d) for d in self.devices()]
        if size == 1:
            return f"tile assignment has a single device in {self}: use {{replicated}} or {{maximal device=N}}"
        if len(set(devices)) != len(devices):
            repeated = sorted({d for d in devices if devices.count(d) > 1})
            return f"device {repeated[0]} appears more than once in {self}"
        if min(devices) < 0:
            return f"device {min(devices)} is negative in {self}"
        if device_count is not None and max(devices) >= device_count:
            return f"device {max(devices)} is not below the device count {device_count} in {self}"
        for rank in ranks or ():
            if rank is not None and rank != self.data_rank:
                return f"sharding {self} tiles {self.data_rank} dimensions but the value has rank {rank}"
        return None


# ---------------------------------------------------------------- parser


_TOKEN = re.compile(r"\s*(<=|[{}\[\](),=]|-?\d+|[A-Za-z_][A-Za-z_0-9]*)")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> ShardingSyntaxError:
        return ShardingSyntaxError(f"invalid HloSharding '{self.text}': {what} at offset {self.pos}")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str | None:
        self.skip_space()
        if self.pos >= len(self.text):
            return None
        match = _TOKEN.match(self.text, self.pos)
        return match.group(1) if match else self.text[self.pos]

    def next(self) -> str:
        token = self.peek()
        if token is None:
            raise self.fail("unexpected end")
        match = _TOKEN.match(self.text, self.pos)
        if not match:
            raise self.fail(f"unexpected character '{self.text[self.pos]}'")
        self.pos = match.end()
        return token

    def expect(self, token: str) -> None:
        got = self.next()
        if got != token:
            raise self.fail(f"expected '{token}', got '{got}'")

    def integer(self) -> int:
        token = self.next()
        if not re.fullmatch(r"-?\d+", token):
            raise self.fail(f"expected an integer, got '{token}'")
        return int(token)

    def int_list(self, open_: str, close: str) -> list[int]:
        self.expect(open_)
        values = []
        if self.peek() == close:
            self.next()
            return values
        while True:
            values.append(self.integer())
            token = self.next()
            if token == close:
                return values
            if token != ",":
                raise self.fail(f"expected ',' or '{close}', got '{token}'")

    def parse(self) -> HloSharding:
        sharding = self.sharding()
        if self.peek() is not None:
            raise self.fail(f"trailing text '{self.text[self.pos:].strip()}'")
        return sharding

    def skip_braced(self) -> None:
        """Skip a `{...}` group (metadata), honouring quotes and nesting."""
        self.skip_space()
        if self.pos >= len(self.text) or self.text[self.pos] != "{":
            raise self.fail("expected '{'")
        depth, quoted = 0, False
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if quoted:
                if char == "\\":
                    self.pos += 1
                elif char == '"':
                    quoted = False
            elif char == '"':
                quoted = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return
        raise self.fail("unterminated metadata")

    def sharding(self) -> HloSharding:
        self.expect("{")
        token = self.peek()
        if token == "{":  # tuple
            elements = [self.sharding()]
            while self.peek() == ",":
                self.next()
                self.skip_index_comment()
                elements.append(self.sharding())
            self.expect("}")
            return HloSharding.tuple_of(elements)
        if token == "}":  # empty tuple
            self.next()
            return HloSharding.tuple_of(())
        word = self.next()
        sharding: HloSharding
        if word in ("replicated", "manual", "unknown"):
            sharding = HloSharding(word)
        elif word == "maximal":
            self.expect("device")
            self.expect("=")
            sharding = HloSharding.maximal(self.integer())
        elif word == "devices":
            sharding = self.tiled()
        else:
            raise self.fail(f"unknown sharding '{word}'")
        self.trailer()
        self.expect("}")
        return sharding

    def skip_index_comment(self) -> None:
        self.skip_space()
        if self.text.startswith("/*", self.pos):
            end = self.text.find("*/", self.pos)
            if end < 0:
                raise self.fail("unterminated comment")
            self.pos = end + 2

    def tiled(self) -> HloSharding:
        self.expect("=")
        dims = self.int_list("[", "]")
        iota, devices = None, None
        if self.peek() == "<=":
            self.next()
            reshape = self.int_list("[", "]")
            perm = None
            if self.peek() == "T":
                self.next()
                perm = self.int_list("(", ")")
            iota = Iota(tuple(reshape), None if perm is None else tuple(perm))
        else:
            devices = [self.integer()]
            while self.peek() == ",":
                self.next()
                devices.append(self.integer())
        replicate, subgroups = False, []
        while True:
            token = self.peek()
            if token == "last_tile_dim_replicate":
                self.next()
                replicate = True
            elif token == "last_tile_dims":
                self.next()
                self.expect("=")
                self.expect("{")
                while True:
                    kind = self.next()
                    if kind not in SUBGROUP_TYPES:
                        raise self.fail(f"unknown subgroup type '{kind}'")
                    subgroups.append(kind)
                    token = self.next()
                    if token == "}":
                        break
                    if token != ",":
                        raise self.fail(f"expected ',' or '}}', got '{token}'")
            else:
                break
        if replicate and subgroups:
            raise self.fail("both last_tile_dim_replicate and last_tile_dims")
        if iota is not None and iota.perm is not None and sorted(iota.perm) != list(range(len(iota.reshape_dims))):
            raise self.fail(f"iota transpose {list(iota.perm)} is not a permutation of {len(iota.reshape_dims)} dimensions")
        if iota is not None and int(np.prod(iota.reshape_dims)) != int(np.prod(dims)):
            raise self.fail(f"iota device list {iota} does not have the {int(np.prod(dims))} devices of tile dimensions {dims}")
        return HloSharding.tiled(dims, devices, iota, replicate, subgroups)

    def trailer(self) -> None:
        """metadata={...} and shard groups are dropped."""
        while True:
            token = self.peek()
            if token == "metadata":
                self.next()
                self.expect("=")
                self.skip_braced()
            elif token in ("shard_as", "shard_like"):
                self.next()
                self.integer()
            else:
                return


# ---------------------------------------------------------------- the attribute


def parse_attribute(attr: ir.Attribute) -> HloSharding:
    """The HloSharding of an `xhlo.sharding` attribute (raises ShardingSyntaxError, TypeError)."""
    if not isinstance(attr, ir.StringAttr):
        raise TypeError(f"xhlo.sharding must be a string in XLA's HloSharding syntax, got {attr}")
    return HloSharding.parse(ir.StringAttr(attr).value)


def sharding_problem(attr: ir.Attribute, result_count: int) -> str | None:
    """None when `attr` is a valid `xhlo.sharding` for an op with `result_count` results."""
    try:
        sharding = parse_attribute(attr)
    except (TypeError, ShardingSyntaxError) as error:
        return str(error)
    if sharding.kind == "tuple" and len(sharding.elements) != result_count:
        return f"tuple sharding {sharding} has {len(sharding.elements)} elements for {result_count} results"
    return sharding.problem()


def value_problem(attr: ir.Attribute, types: list[ir.Type], device_count: int | None) -> str | None:
    """Validation of a sharding against the values it applies to and the module's device count."""
    try:
        sharding = parse_attribute(attr)
    except (TypeError, ShardingSyntaxError) as error:
        return str(error)
    ranks = [ir.RankedTensorType(t).rank if isinstance(t, ir.RankedTensorType) else None for t in types]
    if sharding.kind != "tuple" and len(ranks) > 1:
        # one sharding for several results applies to each of them
        return next((p for r in ranks if (p := sharding.problem([r], device_count))), None)
    return sharding.problem(ranks, device_count)
