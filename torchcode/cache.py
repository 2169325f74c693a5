"""Values derived from files (parsed specs, rendered stubs), kept while those files are unchanged.

The hot commands (`list`, `start`) then skip importing tomllib and jinja2. An entry is valid
while every source file has the same mtime and size and torchcode the same version; a missing,
corrupt or unwritable cache only means computing again. Lives in TORCHCODE_HOME/cache/.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from torchcode import __version__, paths


class DerivedCache:
    def __init__(self, name: str, file: Path | None = None):
        self.file = file or paths.home() / "cache" / f"{name}.json"
        self.entries: dict[str, dict] = {}
        self.dirty = False
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("version") == __version__ and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]
        except (OSError, ValueError):
            pass

    @staticmethod
    def _stamp(sources: list[Path]) -> list[list[int]]:
        return [[st.st_mtime_ns, st.st_size] for st in (os.stat(p) for p in sources)]

    def get(self, key: str, sources: list[Path], compute: Callable[[], Any]) -> Any:
        """``compute()``, or its cached value while ``sources`` are unchanged. Raises what compute raises."""
        stamp = self._stamp(sources)
        hit = self.entries.get(key)
        if isinstance(hit, dict) and hit.get("stamp") == stamp:
            return hit["value"]
        value = compute()
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            return value  # not representable (e.g. TOML dates): just not cached
        self.entries[key] = {"stamp": stamp, "value": value}
        self.dirty = True
        return value

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=f".{self.file.stem}-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"version": __version__, "entries": self.entries}, f)
            os.replace(tmp, self.file)
            self.dirty = False
        except OSError:
            pass  # a read-only home: compute again next time
