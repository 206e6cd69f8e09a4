"""Poisoning, the family alarm and quarantine (issue 13): figures for docs/security.md.

For each dataset slice and stress condition the corpus is written into namespaces of its
own, stage one runs once per question with gold evidence, and three systems pack that
same pool: ``calibrated`` (the default: calibration plus the family alarm and
quarantine), ``unguarded`` (the calibrated mode with the alarm off: pgmem before issue
13) and ``relevance`` (no family term at all). Printed per condition and system:

* evidence recall over the attacked questions and over the unattacked ones, and the
  unattacked questions' recall minus the same questions' recall on the clean store;
* poisoned share of the attacked questions' packed notes, and packs holding poison;
* alarm rate: attacked pools (holding a poisoned note) in which a poisoned family is
  alarmed; false alarms: clean pools (no poisoned note) in which any family is alarmed.

With ``--beta`` the beta mode is also run under ``poison-one`` with gold, noisy (30 % of
judgements flipped) and adversarial feedback (the attacker judges its own packed notes
helpful), cross-fitted over 2 folds as in ``pgmem eval``; not on HotpotQA, where no
family recurs across namespaces and beta equals relevance by construction.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_provenance.py --home /tmp/prov/home \\
        --datasets hotpotqa multihop locomo --out eval-out/provenance.json --beta

``--render a.json b.json`` prints the Markdown tables of earlier runs.

Namespaces already holding a condition's corpus (same prefix, same note count) are not
written again, so a second run only packs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

import pgmem
from pgmem.embeddings import CachedEmbedder, resolve_embedder
from pgmem.eval.arrival import simulate_arrival
from pgmem.eval.datasets import EvalCorpus, load_dataset
from pgmem.eval.metrics import QuestionResult, evidence_recall
from pgmem.eval.runner import RunConfig, _Session, evaluate, ingest_corpus
from pgmem.eval.stress import apply_condition, attack_targets, poisoned_share
from pgmem.params import CalibrationParams, Mode, PackParams, StageOneParams
from pgmem.retrieval.calibrate import calibrate
from pgmem.retrieval.packer import rank_and_pack
from pgmem.retrieval.pipeline import fetch_pool

CONDITIONS = (
    "clean",
    "poison-one",
    "poison-one-3",
    "poison-one-1",
    "poison-quarter-para",
    "poison-lookalike",
    "poison-echo",
    "poison-spread",
    "poison-fresh",
)
SYSTEMS: dict[str, tuple[CalibrationParams, Mode]] = {
    "calibrated": (CalibrationParams(), "calibrated"),
    "unguarded": (CalibrationParams(alarm_threshold=None, newcomer_share=None), "calibrated"),
    "relevance": (CalibrationParams(), "relevance"),
}
#: Seconds before the attack that the genuine store is simulated to have been written
#: (the burst gate reads write times; the harness writes a store in seconds).
STORE_AGE = 86_400.0
#: Seconds before the attack that ``--late-families`` are simulated to have arrived.
LATE_AGE = 3_600.0
FEEDBACK = {
    "gold": RunConfig(),
    "noisy-30": RunConfig(feedback_noise=0.3),
    "adversarial": RunConfig(adversarial_feedback=True),
}


def dataset_slice(name: str, data_dir: Path) -> EvalCorpus:
    """The slice evaluated: LoCoMo's first conversation (conv-26), the others whole."""
    corpus = load_dataset(name, data_dir)
    if name != "locomo":
        return corpus
    first = sorted(corpus.spans)[0]
    questions = tuple(q for q in corpus.questions if q.namespace == first)
    return dataclasses.replace(corpus, spans={first: corpus.spans[first]}, questions=questions)


def _ingest_if_needed(
    conn: psycopg.Connection[Any],
    corpus: EvalCorpus,
    embedder: Any,
    config: RunConfig,
    store_age: float = STORE_AGE,
    attacker_spacing: float | None = None,
    late_families: float = 0.0,
) -> float:
    """Write the corpus as it would arrive: the genuine notes ``store_age`` seconds ago
    (simulated, as owner), then the attacker's poisoned notes now, in one write (their
    real write times), or, with ``attacker_spacing``, one every that many seconds up to
    now (simulated: the labelled patient attacker). With ``late_families``, that share of
    each namespace's genuine families (seeded by the namespace) is simulated as arriving
    at once :data:`LATE_AGE` seconds ago, after the rest of the store: legitimate new
    families, so that being new is not what tells the attacker apart."""
    names = [config.namespace_prefix + namespace for namespace in corpus.spans]
    stored = dict(
        conn.execute(
            "SELECT namespace, note_count FROM pgmem.namespaces WHERE namespace = ANY (%s)", (names,)
        ).fetchall()
    )
    if all(stored.get(config.namespace_prefix + ns) == len(spans) for ns, spans in corpus.spans.items()):
        return 0.0
    started = time.perf_counter()
    genuine = {
        ns: tuple(s for s in spans if not (s.metadata or {}).get("poisoned")) for ns, spans in corpus.spans.items()
    }
    attack = {ns: tuple(s for s in spans if (s.metadata or {}).get("poisoned")) for ns, spans in corpus.spans.items()}
    ingest_corpus(conn, dataclasses.replace(corpus, spans=genuine), embedder, config)
    for namespace in corpus.spans:
        simulate_arrival(conn, config.namespace_prefix + namespace, store_age)
        families = sorted({span.family for span in genuine[namespace]})
        late = random.Random(namespace).sample(families, round(late_families * len(families)))
        if late:
            simulate_arrival(conn, config.namespace_prefix + namespace, LATE_AGE, families=late)
    ingest_corpus(conn, dataclasses.replace(corpus, spans={ns: s for ns, s in attack.items() if s}), embedder, config)
    if attacker_spacing is not None:
        for namespace, spans in attack.items():
            ids = [
                str(row[0])
                for row in conn.execute(
                    "SELECT note_id FROM pgmem.notes WHERE namespace = %s AND external_id = ANY (%s)",
                    (config.namespace_prefix + namespace, [s.external_id for s in spans]),
                )
            ]
            if ids:
                seconds_ago = attacker_spacing * (len(ids) - 1)
                simulate_arrival(
                    conn, config.namespace_prefix + namespace, seconds_ago, note_ids=ids, spacing=attacker_spacing
                )
    return time.perf_counter() - started


def _mean(values: Sequence[float]) -> float:
    return 100 * sum(values) / len(values) if values else math.nan


def run_condition(
    conn: psycopg.Connection[Any],
    corpus: EvalCorpus,
    embedder: Any,
    prefix: str,
    k: int = 50,
    store_age: float = STORE_AGE,
    attacker_spacing: float | None = None,
    late_families: float = 0.0,
) -> tuple[dict[str, list[QuestionResult]], dict[str, float]]:
    """Every system on one pool per question (stage one's ``k_dense = k_lex = k``); the
    alarm's hit and false-alarm rates."""
    config = RunConfig(namespace_prefix=prefix, stage_one=StageOneParams(k_dense=k, k_lex=k))
    _ingest_if_needed(conn, corpus, embedder, config, store_age, attacker_spacing, late_families)
    session = _Session(conn, corpus, embedder, config)
    poisoned = {note for notes in attack_targets(corpus).values() for note in notes}
    results: dict[str, list[QuestionResult]] = {system: [] for system in SYSTEMS}
    attacked_pools = hits = clean_pools = false_alarms = 0
    for question in corpus.questions:
        if not question.gold:
            continue
        request = session.request(question)
        pool = fetch_pool(conn, request)
        attacker = {c.family for c in pool.candidates if (c.external_id or c.note_id) in poisoned}
        for system, (params, mode) in SYSTEMS.items():
            calibration = calibrate(pool, params, mode)
            # As finish_pack packs: the hints' entity count gates the coverage weight.
            items = rank_and_pack(pool, calibration, PackParams(), entities=len(request.hints.entities)).items
            results[system].append(
                QuestionResult(
                    question_id=question.id,
                    category=question.category,
                    gold=question.gold,
                    packed=tuple(item.external_id or item.note_id for item in items),
                    packed_texts=(),
                    answers=question.answers,
                    latency_ms={},
                )
            )
            if system != "calibrated":
                continue
            if attacker:
                attacked_pools += 1
                hits += any(calibration.family(family).alarmed for family in attacker)
            else:
                clean_pools += 1
                false_alarms += any(record.alarmed for record in calibration.families)
    rates = {
        "attacked_pools": attacked_pools,
        "alarm_rate": hits / attacked_pools if attacked_pools else math.nan,
        "clean_pools": clean_pools,
        "false_alarm_rate": false_alarms / clean_pools if clean_pools else math.nan,
    }
    return results, rates


def summarise(
    corpus: EvalCorpus,
    results: dict[str, list[QuestionResult]],
    clean: dict[str, dict[str, float]] | None,
) -> dict[str, dict[str, float]]:
    targets = attack_targets(corpus)
    rows: dict[str, dict[str, float]] = {}
    for system, per_question in results.items():
        recall = {r.question_id: evidence_recall(r) for r in per_question}
        attacked = [v for q, v in recall.items() if q in targets and v is not None]
        unattacked = {q: v for q, v in recall.items() if q not in targets and v is not None}
        row = {
            "recall_attacked": _mean(attacked),
            "recall_unattacked": _mean(list(unattacked.values())),
            "poisoned_share": 100 * poisoned_share(per_question, targets) if targets else math.nan,
            "packs_with_poison": 100
            * (
                sum(1 for r in per_question if r.question_id in targets and set(r.packed) & set(_flat(targets)))
                / max(1, sum(1 for r in per_question if r.question_id in targets))
            )
            if targets
            else math.nan,
        }
        if clean is not None and unattacked:
            reference = clean[system]
            row["unattacked_minus_clean"] = _mean([v - reference[q] for q, v in unattacked.items()])
        rows[system] = row
    return rows


def _flat(targets: dict[str, tuple[str, ...]]) -> set[str]:
    return {note for notes in targets.values() for note in notes}


def _cell(value: float, digits: int = 1) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def render(reports: Sequence[dict[str, Any]]) -> str:
    """Markdown tables of one or more JSON reports of this script."""
    lines = [
        "| data | condition | alarm rate (attacked pools) | false alarms (clean pools) | poisoned share:"
        " calibrated / unguarded / relevance | recall, attacked: calibrated / unguarded / relevance |"
        " unattacked − clean store (calibrated) |",
        "|---|---|---|---|---|---|---|",
    ]
    beta = [
        "| data | feedback | beta: recall (attacked) | beta: poisoned share | relevance: recall (attacked) |",
        "|---|---|---|---|---|",
    ]
    for report in reports:
        for dataset, conditions in report["datasets"].items():
            for condition, summary in conditions.items():
                rates = summary["rates"]
                alarm = _cell(100 * rates["alarm_rate"]) if rates["attacked_pools"] else "—"
                false = _cell(100 * rates["false_alarm_rate"]) if rates["clean_pools"] else "—"
                if condition == "clean":
                    recall = summary["recall"]
                    lines.append(
                        f"| {dataset} | clean (recall {_cell(recall['calibrated'])} / {_cell(recall['unguarded'])}"
                        f" / {_cell(recall['relevance'])}) | {alarm} | {false} | — | — | — |"
                    )
                    continue
                systems = summary["systems"]
                share = " / ".join(_cell(systems[s]["poisoned_share"]) for s in SYSTEMS)
                recall = " / ".join(_cell(systems[s]["recall_attacked"]) for s in SYSTEMS)
                unattacked = _cell(systems["calibrated"].get("unattacked_minus_clean", math.nan), 2)
                lines.append(f"| {dataset} | {condition} | {alarm} | {false} | {share} | {recall} | {unattacked} |")
        for dataset, runs in report.get("beta", {}).items():
            for name, entry in runs.items():
                b, r = entry["systems"]["beta"], entry["systems"]["relevance"]
                beta.append(
                    f"| {dataset} | {name} | {_cell(b['recall_attacked'])} | {_cell(b['poisoned_share'])}"
                    f" | {_cell(r['recall_attacked'])} |"
                )
    return "\n".join(lines) + "\n\n" + "\n".join(beta) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", required=True, help="data folder of the embedded server")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--datasets", nargs="+", default=["hotpotqa", "multihop", "locomo"])
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS))
    parser.add_argument("--prefix", default="x", help="namespace prefix of the stored corpora")
    parser.add_argument("--k", type=int, default=50, help="stage one's k_dense and k_lex (default 50)")
    parser.add_argument("--beta", action="store_true", help="also run the beta mode's feedback conditions")
    parser.add_argument(
        "--collusion-cap",
        type=int,
        default=None,
        help="the calibrated system's collusion cap (default: pgmem's default, 0 behind the burst gate; -1: off)",
    )
    parser.add_argument(
        "--store-age",
        type=float,
        default=STORE_AGE,
        help="seconds before the attack the genuine notes are simulated to have been written (default one day)",
    )
    parser.add_argument(
        "--attacker-spacing",
        type=float,
        default=None,
        help="the patient attacker: its notes simulated as written one every this many seconds up to now"
        " (default: all at once, their real write time); use a --prefix of its own",
    )
    parser.add_argument(
        "--late-families",
        type=float,
        default=0.0,
        help="share of each namespace's genuine families simulated as arriving at once an hour ago, after the"
        " store (legitimate new families; default 0); use a --prefix of its own",
    )
    parser.add_argument("--out", default="eval-out/provenance.json")
    parser.add_argument("--render", nargs="+", help="print the Markdown tables of these JSON reports and exit")
    args = parser.parse_args()
    if args.collusion_cap is not None:
        cap = args.collusion_cap if args.collusion_cap >= 0 else None
        SYSTEMS["calibrated"] = (CalibrationParams(collusion_cap=cap), "calibrated")
    if args.render:
        print(render([json.loads(Path(path).read_text(encoding="utf-8")) for path in args.render]))
        return
    embedder = CachedEmbedder(resolve_embedder(None))
    report: dict[str, Any] = {"datasets": {}, "beta": {}}
    started = time.perf_counter()
    with pgmem.connect(home=args.home) as conn:
        for dataset in args.datasets:
            base = dataset_slice(dataset, Path(args.data_dir))
            clean: dict[str, dict[str, float]] | None = None
            report["datasets"][dataset] = {}
            for condition in args.conditions:
                corpus = apply_condition(base, condition)
                prefix = f"{args.prefix}-{dataset}-{condition}-"
                results, rates = run_condition(
                    conn, corpus, embedder, prefix, args.k, args.store_age, args.attacker_spacing, args.late_families
                )
                if condition == "clean":
                    clean = {
                        system: {r.question_id: v for r in rs if (v := evidence_recall(r)) is not None}
                        for system, rs in results.items()
                    }
                    recall = {system: _mean(list(values.values())) for system, values in clean.items()}
                    summary: dict[str, Any] = {"rates": rates, "recall": recall}
                else:
                    summary = {"rates": rates, "systems": summarise(corpus, results, clean)}
                report["datasets"][dataset][condition] = summary
                print(dataset, condition, json.dumps(summary), f"{time.perf_counter() - started:.0f}s", flush=True)
            if args.beta and dataset != "hotpotqa":
                report["beta"][dataset] = {}
                for condition in ("poison-one",):
                    corpus = apply_condition(base, condition)
                    for name, feedback in FEEDBACK.items():
                        config = dataclasses.replace(feedback, namespace_prefix=f"{args.prefix}-{dataset}-{condition}-")
                        run = evaluate(conn, corpus, embedder, config, systems=("beta", "relevance"), ingested=True)
                        scored = {
                            system: summarise(corpus, {system: rs}, None)[system] for system, rs in run.results.items()
                        }
                        recall = {
                            system: _mean([v for r in rs if (v := evidence_recall(r)) is not None])
                            for system, rs in run.results.items()
                        }
                        entry = {"recall": recall, "systems": scored}
                        report["beta"][dataset][f"{condition}/{name}"] = entry
                        print(dataset, "beta", condition, name, json.dumps(entry), flush=True)
    report["seconds"] = round(time.perf_counter() - started)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    print("written", args.out, report["seconds"], "s")


if __name__ == "__main__":
    main()
