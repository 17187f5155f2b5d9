"""Operating the history: back it up, restore it, move it between stores.

* :mod:`.lines`: the JSON Lines format, one conversation a line, each message's bytes as stored, its title and tags;
* :mod:`.places`: where conversations come from and go to: a store (by URL) or a running service (HTTP);
* :mod:`.exporter`: ``chatlab export``; :mod:`.importer`: ``chatlab import``;
* :mod:`.migrate`: ``chatlab migrate --from URL --to URL``, resumable, keeping concurrent writes, verified;
* :mod:`.commands`: the command-line side of the three.

See docs/operations.md.
"""

from .exporter import export_conversations
from .importer import EXISTING_CHOICES, ImportReport, holds_run, import_conversations
from .lines import BadLine, Line, encode_line, numbered_lines, parse_conversation, parse_line
from .migrate import MigrationConflict, MigrationReport, MigrationStopped, migrate
from .places import PlaceError, PlaceUnavailable, ServicePlace, StorePlace, open_place

__all__ = [
    "EXISTING_CHOICES",
    "BadLine",
    "ImportReport",
    "Line",
    "MigrationConflict",
    "MigrationReport",
    "MigrationStopped",
    "PlaceError",
    "PlaceUnavailable",
    "ServicePlace",
    "StorePlace",
    "encode_line",
    "export_conversations",
    "holds_run",
    "import_conversations",
    "migrate",
    "numbered_lines",
    "open_place",
    "parse_conversation",
    "parse_line",
]
