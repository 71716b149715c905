"""MkDocs hook: the benchmark write-ups under ``bench/`` become pages of the site.

``bench/README.md`` and ``bench/results/*.md`` stay where the benchmarks write them; this hook
adds each as a page at the same path under the site (``bench/results/compare.md``), so the
docs link to them and ``mkdocs build --strict`` checks those links like any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]


def on_files(files: Files, config: Any) -> Files:
    """Add ``bench/README.md`` and every ``bench/results/*.md`` to the site's files."""
    sources = [REPO / "bench" / "README.md", *sorted((REPO / "bench" / "results").glob("*.md"))]
    for path in sources:
        uri = path.relative_to(REPO).as_posix()
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
