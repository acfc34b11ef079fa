"""The retail database of one episode: the benchmark's shared initial database, read-only, with the
rows this episode wrote kept beside it.

A fresh copy of the whole database (2.8 MB of JSON) for every episode, gold replay and validation
would cost more than the episode itself; the tools only ever change single rows (an order, a user),
so a row is copied the first time a tool writes it. The database in the benchmark's own schema and
a canonical hash of it are computed from the two parts.
"""
import copy
import hashlib

from evaluation.environments.content import canonical_json

TABLES = ("products", "users", "orders")


class RetailState:
    """`base` is never changed; `write(table, key)` gives this episode's own copy of a row."""

    def __init__(self, base: dict, base_key: str):
        self.base, self.base_key = base, base_key
        self.written: dict[str, dict] = {table: {} for table in TABLES}

    def read(self, table: str, key: str) -> dict | None:
        """A row as this episode sees it (None when there is none); never change what it returns."""
        own = self.written[table]
        return own[key] if key in own else self.base[table].get(key)

    def write(self, table: str, key: str) -> dict:
        """This episode's copy of an existing row, to change in place."""
        own = self.written[table]
        if key not in own:
            own[key] = copy.deepcopy(self.base[table][key])
        return own[key]

    def rows(self, table: str):
        """Every row of `table` in the database's order, as this episode sees it."""
        for key in self.base[table]:
            yield self.read(table, key)

    def changes(self) -> dict:
        """The rows that differ from the initial database, by table (tables without any left out)."""
        found = {table: {key: row for key, row in self.written[table].items() if row != self.base[table][key]}
                 for table in TABLES}
        return {table: rows for table, rows in found.items() if rows}

    def state_hash(self) -> str:
        """Equal for two databases grown from the same initial one exactly when they hold the same
        rows: the initial database's key and the changed rows, as canonical JSON."""
        return hashlib.sha256(canonical_json({"base": self.base_key, "changes": self.changes()}).encode()).hexdigest()

    def database(self) -> dict:
        """The whole database in the benchmark's schema (db.json's keys and nesting)."""
        return {table: {key: self.read(table, key) for key in self.base[table]} for table in self.base}
