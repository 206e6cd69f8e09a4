"""Terminal rendering of packs and their diagnostics (used by the CLI and the demo)."""

from __future__ import annotations

from collections.abc import Collection

from rich.console import Console
from rich.table import Table

from pgmem.types import Pack


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def pack_table(pack: Pack, *, gold: Collection[str] = (), text_width: int = 70) -> Table:
    """The packed notes, best first; ``gold`` external ids are marked with a check."""
    table = Table(title=f"pack for: {_clip(pack.query, 90)}", title_justify="left", expand=False)
    table.add_column("#", justify="right")
    table.add_column("id", no_wrap=True)
    table.add_column("family", no_wrap=True, max_width=18)
    table.add_column("role", no_wrap=True)
    table.add_column("base", justify="right")
    table.add_column("reg", justify="right")
    table.add_column("final", justify="right")
    table.add_column("decayed", justify="right")
    table.add_column("text", no_wrap=True, overflow="ellipsis", min_width=20)
    for item in pack.items:
        mark = " [green]✓[/green]" if item.external_id in gold else ""
        table.add_row(
            str(item.rank),
            (item.external_id or item.note_id[:8]) + mark,
            _clip(item.family, 18),
            item.role,
            f"{item.base_score:.3f}",
            f"{item.regularizer:+.3f}",
            f"{item.final_score:.2f}",
            f"{item.decayed_score:.2f}",
            _clip(item.text, text_width),
        )
    return table


def family_table(pack: Pack, *, limit: int = 8) -> Table:
    """Per-family calibration of the pool, largest families first."""
    d = pack.diagnostics
    state = f"[red]degraded: {', '.join(d.degraded_reasons)}[/red]" if d.degraded else "[green]calibrating[/green]"
    table = Table(
        title=(
            f"pool N={d.pool_size}  mean={d.pool_mean:.3f}  var={d.pool_variance:.4f}  "
            f"H={d.entropy:.2f} nats  mode={d.mode}  {state}"
        ),
        title_justify="left",
    )
    for column in ("family", "m_f", "R_f", "z", "c", "r", "u", "reg", "floor"):
        table.add_column(column, justify="left" if column == "family" else "right", no_wrap=True)
    ranked = sorted(d.families, key=lambda f: (-f.count, -f.z, f.family))
    for f in ranked[:limit]:
        table.add_row(
            _clip(f.family, 22),
            str(f.count),
            f"{f.score_sum:.2f}",
            f"{f.z:+.2f}",
            f"{f.corroboration:+.2f}",
            f"{f.reliability:.2f}",
            f"{f.uncertainty:.2f}",
            f"{f.regularizer:+.3f}",
            "yes" if f.variance_floor_dominated else "",
        )
    if len(ranked) > limit:
        table.caption = f"… and {len(ranked) - limit} more families"
    return table


def print_pack(console: Console, pack: Pack, *, gold: Collection[str] = ()) -> None:
    """Both tables and a line on rejections and timings."""
    console.print(pack_table(pack, gold=gold))
    console.print(family_table(pack))
    d = pack.diagnostics
    reasons: dict[str, int] = {}
    for rejection in d.rejections:
        reasons[rejection.reason] = reasons.get(rejection.reason, 0) + 1
    rejected = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) or "none"
    timings = ", ".join(f"{name} {ms:.1f} ms" for name, ms in d.timings_ms.items())
    console.print(f"rejected: {rejected}   timings: {timings}\n")
