"""The shape of one protocol's entry in the classification rule table (recorder/rules.py says
how it is compiled). Each in-tree protocol's entry is data in its own package (`<proto>/rules.py`),
so that its names stay there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProtocolRules:
    name: str
    client_methods: frozenset[str] = frozenset()
    agent_methods: frozenset[str] = frozenset()
    # method -> path inside `params` of its finer type (taken when it is a string)
    typed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # method -> path inside `params` of its payload, when params is an object (else params)
    payload_at: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # agent method -> the finer types known for it (the method alone is not enough)
    known_types: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # JSON paths (from the message) of the text of streamed pieces, which the loader's stream
    # join redacts joined (recorder/redact_stream.py): the bulk path screens their joined text
    pieces: tuple[str, ...] = ()
    # a read holding this goes frame by frame (pieces may be nested deeper than `pieces` reach)
    nested_marker: bytes | None = None
