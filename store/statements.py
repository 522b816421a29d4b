"""Core statements compiled once per dialect and run straight through the driver.

Why: for a 50-event append, SQLAlchemy's per-execution work (cache lookup, one
parameter dict processed per row, result setup) cost more than the SQLite commit
itself. The SQL text here still comes from the Table metadata compiled by the
engine's own dialect, so nothing is SQLite-specific; only the per-call machinery
is skipped. Positional drivers (sqlite3: ``?``) get tuples in the compiled order;
named ones (psycopg 3: ``%(name)s``) get dicts keyed by the compiled bind names.
A statement whose binds the compiler had to rename, expand or render literally
keeps the ordinary Core execution path, because its driver parameters would have
to be guessed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection, CursorResult, Dialect
from sqlalchemy.sql import ClauseElement

Processor = Callable[[Any], Any] | None


class DriverStatement:
    """One statement compiled for ``dialect``; ``fast`` tells whether it bypasses Core."""

    def __init__(
        self, stmt: ClauseElement, dialect: Dialect, *, column_keys: Sequence[str] | None = None
    ) -> None:
        self.stmt = stmt
        compiled = stmt.compile(dialect=dialect, column_keys=list(column_keys or []) or None)
        binds = compiled.binds
        self.named = not dialect.positional
        order = compiled.positiontup if dialect.positional else tuple(binds)
        self.fast = bool(
            order is not None
            and all(name in binds for name in order)
            and not compiled.literal_execute_params
            and not compiled.post_compile_params
            and not compiled.escaped_bind_names
            and (not self.named or len(set(compiled.bind_names.values())) == len(binds))
        )
        self.sql = compiled.string
        self.order: tuple[str, ...] = tuple(order or ())
        self.processors: tuple[Processor, ...] = tuple(
            binds[name].type.dialect_impl(dialect).bind_processor(dialect)
            for name in self.order
        ) if self.fast else ()

    def driver_params(self, values: Mapping[str, Any]) -> tuple | dict[str, Any]:
        processed = tuple(
            value if proc is None else proc(value)
            for proc, value in zip(self.processors, (values[n] for n in self.order), strict=True)
        )
        return dict(zip(self.order, processed, strict=True)) if self.named else processed

    def execute(self, conn: Connection, values: Mapping[str, Any]) -> CursorResult:
        if self.fast:
            return conn.exec_driver_sql(self.sql, self.driver_params(values))
        return conn.execute(self.stmt, dict(values))  # type: ignore[arg-type]

    def execute_rows(
        self, conn: Connection, const: Mapping[str, Any], row_keys: tuple[str, ...],
        rows: Sequence[tuple],
    ) -> None:
        """Execute once per row; each row holds ``row_keys`` and shares ``const``.

        The fast path builds each driver row with one concatenation and one C-level
        reorder (positional) or one zip (named), instead of a dict per row processed
        column by column.
        """
        if not self.fast:
            conn.execute(  # type: ignore[call-overload]
                self.stmt, [{**const, **dict(zip(row_keys, r, strict=True))} for r in rows]
            )
            return
        const_keys = tuple(k for k in self.order if k not in row_keys)
        layout = const_keys + row_keys
        if sorted(layout) != sorted(self.order):
            raise ValueError(f"parameters {layout} do not match statement {self.order}")
        proc = dict(zip(self.order, self.processors, strict=True))
        head = tuple(
            const[k] if proc[k] is None else proc[k](const[k])  # type: ignore[misc]
            for k in const_keys
        )
        if any(proc[k] is not None for k in row_keys):
            rows = [
                tuple(
                    v if p is None else p(v)
                    for v, p in zip(r, (proc[k] for k in row_keys), strict=True)
                )
                for r in rows
            ]
        params: list[Any]
        if self.named:
            params = [dict(zip(layout, head + r, strict=True)) for r in rows]
        elif len(self.order) == 1:
            params = [head + r for r in rows]
        else:
            reorder = operator.itemgetter(*(layout.index(k) for k in self.order))
            params = [reorder(head + r) for r in rows]
        conn.exec_driver_sql(self.sql, params)
