"""Operating the history: back it up and restore it (``chatlab export`` and ``import``, as JSON Lines, from and
into a store or a running service) and move it between stores (``chatlab migrate``). See docs/operations.md.
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
