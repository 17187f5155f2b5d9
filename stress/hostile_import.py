"""Hostile import files: a byte-order mark, bad lines among good ones, a huge line, keys the service refuses.
``python -m chatlab import`` must import every good line, report every bad one by number and go on, hold no
more than the line limit in memory, and change nothing when run again with ``--existing append``.

Each file is imported into a SQLite store (``--store``) and into a running service (``--url``), twice.

    python -m stress.hostile_import                              # a 64 MiB line (~1 min)
    python -m stress.hostile_import --huge-mib 1024              # the 1 GiB line
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from stress._probe import Service, Tally, chatlab_command, count, environment, message, stored_texts

BOM = b"\xef\xbb\xbf"
#: Runs a command and prints its exit status and its peak memory (KiB), so each import is measured alone.
_MEASURE = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
    "sys.stderr.write(r.stderr.decode(errors='replace')); "
    "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _line(key: str, *texts: str) -> bytes:
    messages = b",".join(message(text) for text in texts)
    return b'{"conversationKey":' + json.dumps(key).encode() + b',"messages":[' + messages + b"]}\n"


def _files(workdir: Path, huge_mib: int) -> dict[str, tuple[Path, list[str], list[int]]]:
    """Each file: its path, the keys of its good lines, the numbers of its bad lines."""
    files: dict[str, tuple[Path, list[str], list[int]]] = {}

    def write(name: str, lines: list[bytes], good: list[str], bad: list[int], head: bytes = b"") -> None:
        path = workdir / f"{name}.jsonl"
        path.write_bytes(head + b"".join(lines))
        files[name] = (path, good, bad)

    write("bom", [_line(f"bom{i}", f"bom{i}") for i in range(3)], ["bom0", "bom1", "bom2"], [], BOM)
    write(
        "bad lines",
        [
            _line("bad0", "bad0"),
            b"not json\n",
            b'{"conversationKey":"x","messages":[{"role":3}]}\n',
            _line("bad1", "bad1"),
            b'{"messages":[]}\n',
            b'{"conversationKey":"nested","messages":[{"role":"user","contents":['
            + b"[" * 1000
            + b"]" * 1000
            + b"]}]}\n",
            b"\xff\xfe not utf-8\n",
            _line("bad2", "bad2"),
        ],
        ["bad0", "bad1", "bad2"],
        [2, 3, 5, 6, 7],
    )
    write(
        "bad keys",
        [_line(key, "k") for key in ["alice/secret", "../x", "a\x00b", "tab\there", "x" * 300]]
        + [_line("keys0", "keys0")],
        ["keys0"],
        [1, 2, 3, 4, 5],
    )
    huge = workdir / "huge line.jsonl"
    with huge.open("wb") as out:
        out.write(_line("huge0", "huge0"))
        out.write(b'{"conversationKey":"huge","messages":[{"role":"user","contents":[{"$type":"text","text":"')
        chunk = b"x" * (1 << 20)
        for _ in range(huge_mib):
            out.write(chunk)
        out.write(b'"}]}]}\n')
        out.write(_line("huge1", "huge1"))
    files["huge line"] = (huge, ["huge0", "huge1"], [2])
    return files


def _import(path: Path, where: list[str], *flags: str) -> tuple[int, int, str]:
    """Exit status, peak memory (MiB) and what the import said."""
    command = [sys.executable, "-c", _MEASURE, *chatlab_command("import", str(path), *where, *flags)]
    done = subprocess.run(command, capture_output=True, text=True, env=environment(), timeout=600)
    status, peak = map(int, done.stdout.split())
    return status, peak // 1024, done.stderr


def probe(huge_mib: int) -> list[Tally]:
    """Every hostile file into a store and into a service, twice; a tally per import."""
    tallies = []
    with tempfile.TemporaryDirectory() as workdir:
        files = _files(Path(workdir), huge_mib)
        for place in ("store", "service"):
            db = Path(workdir) / f"{place}.db"
            service = Service(f"sqlite:///{db}").start() if place == "service" else None
            where = ["--url", service.url] if service else ["--store", f"sqlite:///{db}"]
            tally = Tally(f"hostile import files (--{'url' if service else 'store'})")
            try:
                problems = []
                for name, (path, good, bad) in files.items():
                    tally.sent += len(good)
                    for attempt in ("first", "again"):
                        flags = [] if attempt == "first" else ["--existing", "append"]
                        status, peak, said = _import(path, where, *flags)
                        reported = sorted(
                            int(line.split("line ", 1)[1].split(":", 1)[0])
                            for line in said.splitlines()
                            if line.startswith("error: ") and ": line " in line
                        )
                        if "Traceback" in said or reported != bad or status != (1 if bad else 0):
                            problems.append(f"{name} ({attempt}): exit {status}, bad lines reported {reported}")
                        tally.notes[f"{name} peak MiB"] = max(peak, int(str(tally.notes.get(f"{name} peak MiB", 0))))
                if service is None:
                    service = Service(f"sqlite:///{db}").start()
                stored = stored_texts(service.url)
                good_keys = [key for _, good, _ in files.values() for key in good]
                tally.acknowledged = sum(1 for key in good_keys if key in stored)
                tally.lost = len(good_keys) - tally.acknowledged
                tally.duplicated = sum(times - 1 for times in count(stored).values() if times > 1)
                tally.notes["unexpected"] = "; ".join(problems) or "none"
                tally.notes["bad keys stored"] = sum(1 for key in stored if not key.isalnum())
            finally:
                if service is not None:
                    service.stop()
            tallies.append(tally)
    return tallies


def main() -> int:
    """The probe from the command line; 1 when an import went against the documented behaviour."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--huge-mib", type=int, default=64, help="size of the huge line in MiB (default 64)")
    args = parser.parse_args()
    status = 0
    for tally in probe(args.huge_mib):
        status |= tally.report()
        status |= 1 if tally.notes["unexpected"] != "none" or tally.notes["bad keys stored"] else 0
    return status


if __name__ == "__main__":
    sys.exit(main())
