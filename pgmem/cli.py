"""The ``pgmem`` command: migrate, ingest, pack, demo."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pgmem.api import ingest, pack
from pgmem.db.connection import connect
from pgmem.db.migrate import migrate
from pgmem.errors import ConfigurationError, PgmemError
from pgmem.ingestion.sources import FAMILY_BY, SplitConfig, spans_from_path
from pgmem.params import MODES, ROLES, PackParams
from pgmem.render import print_pack


def _connection(args: argparse.Namespace) -> Any:
    return connect(args.dsn, home=args.home, migrate=True if args.dsn is None else None)


def _progress(console: Console) -> Progress:
    """A progress bar with a count and the elapsed time (drawn only on a terminal)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=not console.is_terminal,
    )


def _cmd_migrate(args: argparse.Namespace, console: Console) -> int:
    with connect(args.dsn, home=args.home, migrate=False) as conn:
        revision = migrate(conn, role_prefix=args.role_prefix, shared_roles=args.shared_roles)
    console.print(f"pgmem schema is at revision {revision}")
    return 0


def _cmd_ingest(args: argparse.Namespace, console: Console) -> int:
    split = SplitConfig(unit=args.unit, target_bytes=args.target_bytes, max_bytes=args.max_bytes)
    batches = [
        (path, spans_from_path(path, family=args.family, split=split, family_by=args.family_by)) for path in args.paths
    ]
    total = sum(len(spans) for _, spans in batches)
    inserted = skipped = 0
    started = time.perf_counter()
    with (
        _connection(args) as conn,
        _progress(console) as progress,
    ):
        task = progress.add_task("ingesting", total=total)
        for path, spans in batches:
            progress.update(task, description=f"ingesting {path.name}")
            result = ingest(
                conn,
                spans,
                namespace=args.namespace,
                embedder=args.embedder,
                progress=lambda n: progress.advance(task, n),
            )
            inserted += result.inserted
            skipped += result.skipped
    console.print(
        f"{total} spans from {len(batches)} file(s) into namespace {args.namespace!r}:"
        f" {inserted} new notes, {skipped} already present ({time.perf_counter() - started:.1f} s)"
    )
    return 0


def _cmd_pack(args: argparse.Namespace, console: Console) -> int:
    with _connection(args) as conn:
        evidence = pack(
            conn,
            args.question,
            budget=args.budget,
            namespace=args.namespace,
            mode=args.mode,
            token_budget=args.token_budget,
            family_cap=args.family_cap,
            roles=args.roles,
            embedder=args.embedder,
            log=args.log,
            where=args.where,
            timeout=args.timeout,
        )
    if args.json:
        sys.stdout.write(evidence.to_json(indent=2) + "\n")
    else:
        print_pack(console, evidence)
    return 0


def _cmd_demo(args: argparse.Namespace, console: Console) -> int:
    from pgmem.demo import run_demo

    started = time.perf_counter()
    with _connection(args) as conn:
        run_demo(conn, console, embedder=args.embedder)
    console.print(f"\ndemo finished in {time.perf_counter() - started:.1f} s")
    return 0


def _cmd_eval(args: argparse.Namespace, console: Console) -> int:
    import json

    from pgmem.embeddings import CachedEmbedder, resolve_embedder
    from pgmem.eval.datasets import load_dataset
    from pgmem.eval.plots import plot_recall
    from pgmem.eval.report import build_report, render_markdown, render_summary, write_report
    from pgmem.eval.runner import SYSTEMS, RunConfig, evaluate, evaluation_steps
    from pgmem.eval.stress import apply_condition
    from pgmem.types import jsonable

    systems = args.systems or list(SYSTEMS)
    out = Path(args.out)
    runs = [(dataset, condition) for dataset in args.dataset for condition in args.condition]
    # Every condition re-ingests the same corpus into namespaces of its own: embed each text once.
    embedder = CachedEmbedder(resolve_embedder(args.embedder))
    reports = []
    with _connection(args) as conn:
        for dataset, condition in runs:
            corpus = load_dataset(dataset, Path(args.data_dir))
            if args.limit is not None:
                corpus = dataclasses.replace(corpus, questions=corpus.questions[: args.limit])
            corpus = apply_condition(corpus, condition, seed=args.seed)
            # Each condition in namespaces of its own: a stressed corpus never mixes with the clean one.
            config = RunConfig(
                budget=args.budget,
                packing=PackParams(budget=args.budget, family_cap=args.family_cap),
                namespace_prefix=f"eval-{corpus.name}-{condition}-s{args.seed}-",
                feedback_folds=args.folds,
                seed=args.seed,
            )
            with _progress(console) as progress:
                task = progress.add_task(
                    f"{corpus.name} / {condition}", total=evaluation_steps(corpus, systems, config)
                )
                run = evaluate(
                    conn, corpus, embedder, config, systems=systems, progress=functools.partial(progress.advance, task)
                )
            report = build_report(corpus, run, config, condition=condition)
            folder = out if len(runs) == 1 else out / f"{corpus.name}-{condition}"
            markdown, data = write_report(report, folder)
            if len(runs) == 1:
                console.print(render_markdown(report), markup=False, highlight=False)
            console.print(f"written: {markdown}, {data}")
            reports.append(json.loads(data.read_text(encoding="utf-8")))
    written = [plot_recall(reports, out / "recall.png")]
    if len(runs) > 1:
        summary = render_summary(reports)
        (out / "summary.md").write_text(summary, encoding="utf-8")
        (out / "summary.json").write_text(json.dumps(jsonable(reports), indent=2) + "\n", encoding="utf-8")
        console.print(summary, markup=False, highlight=False)
        written += [out / "summary.md", out / "summary.json"]
    console.print("written: " + ", ".join(str(path) for path in written))
    return 0


def _cmd_eval_compaction(args: argparse.Namespace, console: Console) -> int:
    import pgmem.eval.plots  # noqa: F401  (fails at once without the 'eval' extra, not after the run)
    from pgmem.embeddings import CachedEmbedder, resolve_embedder
    from pgmem.eval.compaction import (
        CompactionEvalConfig,
        render_compaction_markdown,
        run_compaction_eval,
        write_compaction_outputs,
    )
    from pgmem.eval.datasets import load_dataset

    config = CompactionEvalConfig(
        caps=tuple(args.caps),
        systems=tuple(args.systems) if args.systems else CompactionEvalConfig().systems,
        limit_conversations=args.limit_conversations,
        ask=args.ask,
        limit_questions=args.limit_questions,
        limit_sessions=args.limit_sessions,
    )
    chat = _eval_chat(args) if args.chat else None
    corpus = load_dataset(args.dataset, Path(args.data_dir))
    # Every cap and system archives the same turns: embed each text once.
    embedder = CachedEmbedder(resolve_embedder(args.embedder))
    started = time.perf_counter()
    with _connection(args) as conn, _progress(console) as progress:
        task = progress.add_task("replaying", total=None)
        advance = functools.partial(progress.advance, task)
        report = run_compaction_eval(conn, corpus, embedder, config, progress=advance, chat=chat)
    written = write_compaction_outputs(report, Path(args.out))
    console.print(render_compaction_markdown(report), markup=False, highlight=False)
    console.print(f"written: {', '.join(map(str, written))} ({time.perf_counter() - started:.0f} s)")
    return 0


def _eval_chat(args: argparse.Namespace) -> Any:
    """The OpenAIChat of ``eval-compaction --chat``: PGMEM_CHAT_BASE_URL, --chat-model or PGMEM_CHAT_MODEL."""
    from pgmem.compaction import OpenAIChat

    base_url = os.environ.get("PGMEM_CHAT_BASE_URL", "").strip()
    if not base_url:
        raise ConfigurationError(
            "--chat needs PGMEM_CHAT_BASE_URL, the root of an OpenAI-compatible API (e.g. http://127.0.0.1:8080/v1)"
        )
    model = (args.chat_model or os.environ.get("PGMEM_CHAT_MODEL", "")).strip()
    if not model:
        raise ConfigurationError("--chat needs a model name: --chat-model or PGMEM_CHAT_MODEL")
    return OpenAIChat(base_url, model, timeout=args.chat_timeout)


def _cmd_growth(args: argparse.Namespace, console: Console) -> int:
    import pgmem.eval.plots  # noqa: F401  (fails at once without the 'eval' extra, not after the run)
    from pgmem.eval.growth import growth_command

    return growth_command(args, console, connect=_connection, progress=_progress(console))


def _cmd_mcp(args: argparse.Namespace, console: Console) -> int:
    """Serve pgmem's MCP tools; stdout is the protocol channel in stdio mode, so nothing else prints there."""
    from pgmem.errors import ConfigurationError

    try:
        from pgmem.integrations.mcp import Memory, serve
    except ImportError as exc:
        raise ConfigurationError(f"pgmem mcp needs the 'mcp' extra: pip install 'pgmem[mcp]' ({exc})") from exc

    def open_connection() -> Any:
        return connect(args.dsn, home=args.home, namespace=args.namespace, migrate=True if args.dsn is None else None)

    memory = Memory(open_connection, namespace=args.namespace, embedder=args.embedder, log_packs=args.log_packs)
    serve(memory, transport=args.transport, host=args.host, port=args.port, path=args.path)
    return 0


def _add_mcp_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p_mcp = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the MCP tools remember, pack, recall, feedback, forget (needs the 'mcp' extra)",
        description="The namespace and the database role are the server's (--namespace, --dsn), never the model's.",
    )
    p_mcp.add_argument("--namespace", default="default", help="the one memory this server reads and writes")
    p_mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="stdio or streamable HTTP")
    p_mcp.add_argument("--host", default="127.0.0.1", help="HTTP address to listen on (default 127.0.0.1)")
    p_mcp.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    p_mcp.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    p_mcp.add_argument("--log-packs", action="store_true", help="persist every pack to pgmem.pack_log (pack_id)")


def _cmd_bench(args: argparse.Namespace, console: Console) -> int:
    from pgmem.eval.bench import bench_command

    return bench_command(args, console, connect=_connection)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pgmem", description="Memory for LLM agents inside PostgreSQL.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dsn", help="PostgreSQL DSN (default $PGMEM_DSN, else the embedded server)")
    common.add_argument("--home", help="data folder of the embedded server (default $PGMEM_HOME)")
    common.add_argument("--embedder", help="minilm (default), hashing, or openai:MODEL")
    sub = parser.add_subparsers(dest="command", required=True)

    p_migrate = sub.add_parser("migrate", parents=[common], help="create or upgrade the schema (idempotent)")
    p_migrate.add_argument(
        "--role-prefix",
        help="install the group roles as PREFIX_reader/_writer/_admin (default pgmem; one prefix per database"
        " whose admins must stay apart)",
    )
    p_migrate.add_argument(
        "--shared-roles",
        action="store_true",
        help="install even though the group roles already hold privileges in another database of the cluster",
    )

    p_ingest = sub.add_parser(
        "ingest",
        parents=[common],
        help="ingest text or Markdown documents, conversations (.json/.jsonl turns) or JSONL span records",
    )
    p_ingest.add_argument("paths", nargs="+", type=Path)
    p_ingest.add_argument("--namespace", default="default")
    p_ingest.add_argument("--family", help="family of every span (default: the file name, or the conversation session)")
    p_ingest.add_argument("--family-by", choices=FAMILY_BY, default="session", help="family of conversation turns")
    p_ingest.add_argument("--unit", choices=("paragraph", "sentence"), default="paragraph", help="document span unit")
    p_ingest.add_argument("--target-bytes", type=int, default=SplitConfig().target_bytes)
    p_ingest.add_argument("--max-bytes", type=int, default=SplitConfig().max_bytes)

    p_pack = sub.add_parser("pack", parents=[common], help="pack evidence for a question")
    p_pack.add_argument("question")
    p_pack.add_argument("--namespace", default="default")
    p_pack.add_argument("--budget", type=int, default=8)
    p_pack.add_argument("--token-budget", type=int)
    p_pack.add_argument("--family-cap", type=int)
    p_pack.add_argument("--mode", choices=MODES, default="calibrated")
    p_pack.add_argument("--roles", nargs="+", choices=ROLES)
    p_pack.add_argument("--where", help="metadata filter, e.g. \"role = 'fact' AND metadata->>'lang' = 'en'\"")
    p_pack.add_argument("--timeout", type=float, help="seconds stage one may run")
    p_pack.add_argument("--log", action="store_true", help="persist the pack to pgmem.pack_log")
    p_pack.add_argument("--json", action="store_true", help="print the pack as JSON")

    sub.add_parser("demo", parents=[common], help="ingest a real corpus and show packs with diagnostics")

    p_eval = sub.add_parser("eval", parents=[common], help="evaluate pgmem's modes and plain baselines on a dataset")
    p_eval.add_argument(
        "dataset",
        nargs="+",
        help="locomo, multihop, hotpotqa, a generic .jsonl file or a LongMemEval .json file (docs/eval_data.md)",
    )
    p_eval.add_argument("--data-dir", default="../shared/data", help="folder of the shared datasets")
    p_eval.add_argument("--out", default="eval-out", help="folder for the reports (Markdown, JSON) and plots")
    p_eval.add_argument("--budget", type=int, default=8)
    p_eval.add_argument("--limit", type=int, help="only the first N questions")
    p_eval.add_argument(
        "--systems",
        nargs="+",
        help="calibrated relevance raw_bonus beta dense lexical rrf (default all); ablations: "
        "calibrated-no-shrinkage calibrated-no-uncertainty calibrated-no-prior",
    )
    p_eval.add_argument(
        "--condition", nargs="+", default=["clean"], help="stress conditions (docs/eval_stress.md), default clean"
    )
    p_eval.add_argument("--folds", type=int, default=2, help="cross-fitting folds of the beta mode (default 2)")
    p_eval.add_argument("--seed", type=int, default=0, help="seed of the stress condition")
    p_eval.add_argument("--family-cap", type=int, help="at most this many notes per family in a pack")

    p_compaction = sub.add_parser(
        "eval-compaction",
        parents=[common],
        help="replay LoCoMo as a growing agent context: compaction policies under a live token cap",
    )
    p_compaction.add_argument("dataset", help="locomo")
    p_compaction.add_argument("--data-dir", default="../shared/data", help="folder of the shared datasets")
    p_compaction.add_argument("--out", default="eval-out/compaction", help="folder for compaction.json/.md/.png")
    p_compaction.add_argument("--caps", type=int, nargs="+", default=[2000, 4000, 8000], help="live caps (tokens)")
    p_compaction.add_argument(
        "--systems", nargs="+", help="none fixed delete_all keep_last rubric rubric+pgmem pack (default all)"
    )
    p_compaction.add_argument("--limit-conversations", type=int, help="only the first N conversations")
    p_compaction.add_argument(
        "--ask",
        choices=["evidence", "end"],
        default="evidence",
        help="ask each question once its evidence was seen (default) or all at the conversation's end",
    )
    p_compaction.add_argument("--limit-questions", type=int, help="only the first N questions of each conversation")
    p_compaction.add_argument(
        "--limit-sessions", type=int, help="only the first N sessions of each conversation (and their questions)"
    )
    p_compaction.add_argument(
        "--chat",
        action="store_true",
        help="a real model at PGMEM_CHAT_BASE_URL judges, summarises and answers the questions (docs/compaction.md)",
    )
    p_compaction.add_argument("--chat-model", help="model name sent to the server (default $PGMEM_CHAT_MODEL)")
    p_compaction.add_argument(
        "--chat-timeout", type=float, default=600.0, help="seconds per chat request (default 600: CPU models are slow)"
    )

    p_growth = sub.add_parser(
        "eval-growth", parents=[common], help="recall and latency as the store grows (distractor padding)"
    )
    p_growth.add_argument("dataset", help="locomo, multihop, hotpotqa, or a generic .jsonl file (docs/eval_data.md)")
    p_growth.add_argument("--data-dir", default="../shared/data", help="folder of the shared datasets")
    p_growth.add_argument("--out", default="eval-out/growth", help="folder for growth.md, growth.json, growth.png")
    p_growth.add_argument("--factors", type=int, nargs="+", default=[1, 10, 100], help="store sizes, × the corpus")
    p_growth.add_argument("--limit", type=int, help="only the first N questions")
    p_growth.add_argument("--namespaces", type=int, help="only the first N namespaces (and their questions)")
    p_growth.add_argument("--budget", type=int, default=8)
    p_growth.add_argument(
        "--systems",
        nargs="+",
        help="calibrated relevance raw_bonus beta dense lexical rrf (default all); ablations: "
        "calibrated-no-shrinkage calibrated-no-uncertainty calibrated-no-prior",
    )
    p_growth.add_argument("--seed", type=int, default=0, help="seed of the distractors")
    p_growth.add_argument("--scale-json", help="benchmarks/bench_scale.py output to overlay on the latency plot")
    _add_mcp_parser(sub, common)

    p_bench = sub.add_parser(
        "bench", parents=[common], help="pack latency per stage, ingest speed, index sizes as a namespace grows"
    )
    p_bench.add_argument("--notes", default="10000", help="store sizes to measure at, comma-separated (default 10000)")
    p_bench.add_argument("--questions", type=int, default=200, help="LoCoMo questions timed at each size")
    p_bench.add_argument("--namespace", default="bench", help="the namespace grown (reused when it exists)")
    p_bench.add_argument("--batch", type=int, default=5000, help="spans per ingest() call")
    p_bench.add_argument("--writers", type=int, default=1, help="ingest() calls at once, a connection each (default 1)")
    p_bench.add_argument("--reindex", action="store_true", help="also time rebuilding the HNSW and GIN indexes")
    p_bench.add_argument("--plot", action="store_true", help="write bench.png (needs the 'eval' extra)")
    p_bench.add_argument("--data-dir", default="../shared/data", help="folder of the shared datasets")
    p_bench.add_argument("--out", default="eval-out/bench", help="folder for bench.json (and bench.png)")
    p_bench.add_argument(
        "--peers",
        action="store_true",
        help="compare with LangChain and LlamaIndex PGVectorStore on the same server (needs the 'peers' extra)",
    )
    p_bench.add_argument(
        "--no-sweep", action="store_true", help="with --peers: skip the sweep for the peers' best setting"
    )
    return parser


COMMANDS = {
    "migrate": _cmd_migrate,
    "ingest": _cmd_ingest,
    "pack": _cmd_pack,
    "demo": _cmd_demo,
    "eval": _cmd_eval,
    "eval-growth": _cmd_growth,
    "eval-compaction": _cmd_eval_compaction,
    "mcp": _cmd_mcp,
    "bench": _cmd_bench,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Piped output (make demo in CI, a log file) still gets tables wide enough to read.
    console = Console() if sys.stdout.isatty() else Console(width=150)
    try:
        return COMMANDS[args.command](args, console)
    except PgmemError as exc:
        # Plain text: an error line must survive pipes and log files unwrapped.
        print(f"pgmem: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
