"""What a first study on a machine builds before its trials, said as it starts (issue 55): the pre-flight builds
the workload once, and with it what the reports folder's cache lacked (a dataset's files, the FID feature
classifier and the real images' statistics), a minute that a second study does not pay."""

from __future__ import annotations

from pathlib import Path

DEPTH = 3  # fid/<dataset>/<file>, datasets/<dataset>/<split>


def cache_entries(cache_dir: Path) -> set[str]:
    """The cache's entries down to DEPTH levels (relative paths; hidden ones, the locks, left out)."""
    root = Path(cache_dir)
    if not root.is_dir():
        return set()
    out: set[str] = set()
    level = [root]
    for _ in range(DEPTH):
        nxt = []
        for folder in level:
            try:
                children = list(folder.iterdir())
            except OSError:
                continue
            for p in children:
                if p.name.startswith("."):
                    continue
                out.add(p.relative_to(root).as_posix())
                if p.is_dir():
                    nxt.append(p)
        level = nxt
    return out


def _what(entry: str) -> str | None:
    parts = entry.split("/")
    if parts[0] == "fid" and len(parts) == 3:
        if parts[2].startswith("classifier"):
            return f"the FID feature classifier ({parts[1]})"
        if parts[2].startswith("real"):
            return f"the real images' FID statistics ({parts[1]})"
    if parts[0] == "datasets" and len(parts) == 2:
        return f"the {parts[1]} dataset's files"
    return None  # anything else a pre-flight leaves (a lock, a small record) is no minute to explain


def built_note(before: set[str], after: set[str], seconds: float, cache_dir: Path) -> str | None:
    """One line naming what the pre-flight built that the cache lacked and its time (None: it built nothing)."""
    new = sorted(after - before)
    names = list(dict.fromkeys(w for e in new if (w := _what(e)) is not None))
    if not names:
        return None
    return (f"this machine lacked the workload's one-time caches: the pre-flight built {', '.join(names)} in its "
            f"{seconds:.0f} s, once per machine (kept in {cache_dir}; a second study reads them)")
