"""The `spark-contracts` command line: lint, apply, push and pull data contracts.

    spark-contracts --version
    spark-contracts lint DIR | --registry URL [--subject S ...] [--protobuf-message NAME]
    spark-contracts apply --registry DIR_OR_URL --subject S [--version N] --mode WRITE|READ
                          --input PATH --format parquet|json|csv|avro-parquet|avro-json | --table NAME
                          --output PATH [--output-mode error|overwrite|append]
                          [--unreadable-dlq TOPIC] [--protobuf-message NAME]
                          [--dlq-dir DIR] [--run-id ID] [--allow-unknown-rule-types]
                          [--executor MODULE:ATTR ...] [--action MODULE:ATTR ...]
                          [--rule-config-file PATH] [--rule-config-env NAME]
                          [--max-rejected N|P%] [--dry-run [--sample N]]
    spark-contracts push DIR --registry URL
    spark-contracts pull --registry URL DIR [--subject S ...]
    spark-contracts dlq show TOPIC [--dlq-dir DIR] [-n N]
    spark-contracts dlq replay TOPIC --registry DIR_OR_URL --subject S [--version N] --output PATH
                               [--protobuf-message NAME]
                               [--apply write|deserialize] [--dlq-dir DIR] [--run-id ID]
                               [--executor MODULE:ATTR ...] [--action MODULE:ATTR ...]
                               [--rule-config-file PATH] [--rule-config-env NAME]

Each command also takes --debug. Exit status: 0 success, 1 problems found or something failed
(a user error is one line on stderr; --debug adds its traceback; `apply --max-rejected` exceeded),
2 a usage error (also a plugin of --executor/--action that does not load, or a rule config that
cannot be used: --rule-config-file/--rule-config-env hold a JSON object of strings, whose values
are never printed). `apply --dry-run` (record formats only) runs the rules and writes nothing,
printing the counts and a sample of rejected rows; --output is then optional. A registry URL's
credentials come in the URL, or from --registry-auth-file/--registry-auth-env (KEY:SECRET), which
keep them off the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from actions.dlq.local_topic import DEFAULT_DLQ_DIR
from contracts import __version__
from contracts.cli.apply import DEFAULT_SAMPLE, OUTPUT_MODES, ApplyJob, RejectLimit, prepare_apply, run_apply
from contracts.cli.dlq import add_dlq_command
from contracts.cli.errors import UsageError, is_user_error, one_line
from contracts.cli.inputs import FORMATS, local_absolute
from contracts.cli.message import add_protobuf_message_argument
from contracts.cli.plugins import add_plugin_arguments, load_plugins
from contracts.cli.registry import add_registry_auth_arguments, open_registry, registry_auth
from contracts.cli.rule_config import add_rule_config_arguments, load_rule_config
from contracts.cli.session import PANDAS_WARNING, new_session
from contracts.cli.sync import pull, push
from contracts.errors import ContractWarning, RegistryError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    """The console script: run one subcommand and return its exit status."""
    warnings.filterwarnings("ignore", PANDAS_WARNING, FutureWarning)
    return run(argv)


def run(
    argv: list[str] | None = None,
    *,
    spark: SparkSession | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """`main` with the session and streams injectable: `apply` uses `spark` when given (tests and
    notebooks already have one) and otherwise starts, and afterwards stops, its own."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = _parser()
    try:
        # argparse prints --help, --version and its usage errors to sys.stdout/sys.stderr.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else _USAGE_ERROR
    if isinstance(getattr(args, "output", None), str):
        args.output = local_absolute(args.output)  # where the given session (or ours) writes it
    try:
        with _logging(args.debug, err), warnings.catch_warnings():
            # A rule type no executor handles is the commands' own to report: `apply` names it and
            # refuses to run, `lint` lists it.
            warnings.simplefilter("ignore", ContractWarning)
            return int(args.handler(args, spark, out, err))
    except UsageError as error:
        if args.debug:
            traceback.print_exception(error, file=err)
        print(f"spark-contracts {args.command}: error: {error}", file=err)
        return _USAGE_ERROR
    except Exception as error:
        if not is_user_error(error):
            raise
        if args.debug:
            traceback.print_exception(error, file=err)
        print(f"spark-contracts {args.command}: {one_line(error)}", file=err)
        return 1


@contextlib.contextmanager
def _logging(debug: bool, err: TextIO) -> Iterator[None]:
    """The project's log (the registry client's requests, retries and failovers) on `err` with
    --debug; otherwise only its errors, so a failure is the one line the CLI prints."""
    logger = logging.getLogger("contracts")
    saved = (logger.level, logger.propagate)
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if debug:
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
        logger.propagate = False
    else:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _lint(args: argparse.Namespace, spark: Any, out: TextIO, err: TextIO) -> int:
    from contracts.cli.lint import lint_directory, lint_registry

    if (args.directory is None) == (args.registry is None):
        raise UsageError("give a directory or --registry, not both")
    if args.directory is not None and args.subject:
        raise UsageError("--subject goes with --registry")
    if args.directory is not None:
        problems = lint_directory(Path(args.directory), args.protobuf_message)
    else:
        registry = open_registry(args.registry, auth=registry_auth(args))
        problems = lint_registry(registry, args.subject or None, protobuf_message=args.protobuf_message)
    for problem in problems:
        print(problem.line(), file=out)
    failing = sum(not problem.note for problem in problems)
    print(f"lint: {failing} problem(s)" if failing else "lint: no problems", file=err)
    return 1 if failing else 0


def _pairs(texts: list[str]) -> tuple[tuple[str, str], ...]:
    """`KEY=VALUE` arguments as pairs; ValueError naming the one without `=` or key."""
    pairs = []
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise ValueError(f"--use-latest-with-metadata takes KEY=VALUE, not {text!r}")
        pairs.append((key, value))
    return tuple(pairs)


def _apply(args: argparse.Namespace, spark: SparkSession | None, out: TextIO, err: TextIO) -> int:
    plugins = load_plugins(args)
    rule_config = load_rule_config(args)
    if args.format is None and args.table is None:
        raise UsageError("--format is required with --input")
    try:
        job = ApplyJob(
            registry=args.registry,
            subject=args.subject,
            mode=args.mode,
            input=args.input,
            table=args.table,
            format=args.format or "parquet",
            output_mode=args.output_mode,
            unreadable_dlq=args.unreadable_dlq,
            registry_auth=registry_auth(args),
            output=args.output,
            dlq_dir=args.dlq_dir,
            version=args.version,
            allow_unknown_rule_types=args.allow_unknown_rule_types,
            run_id=args.run_id,
            use_latest_with_metadata=_pairs(args.use_latest_with_metadata),
            executors=plugins.executors,
            actions=plugins.actions,
            dry_run=args.dry_run,
            sample=args.sample,
            max_rejected=args.max_rejected,
            rule_config=rule_config,
            key_subject=args.key_subject,
            protobuf_message=args.protobuf_message,
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    prepared = prepare_apply(job, err)  # before Spark starts: a mistake costs seconds, not a session
    if prepared is None:
        return 1
    own = spark is None
    session = new_session() if spark is None else spark
    try:
        return run_apply(prepared, session, out, err)
    finally:
        if own:
            session.stop()


def _count(text: str) -> int:
    """A number of rows, 0 or more (argparse type)."""
    number = int(text)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {number}")
    return number


def _reject_limit(text: str) -> RejectLimit:
    """--max-rejected's value (argparse type): its parse error as argparse's usage error."""
    try:
        return RejectLimit.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _push(args: argparse.Namespace, spark: Any, out: TextIO, err: TextIO) -> int:
    source = Path(args.directory)
    if not source.is_dir():
        # Checked before the destination is opened: a new local destination would be created.
        what = "is not a directory" if source.exists() else "does not exist"
        raise RegistryError(f"the contracts directory {str(source)!r} {what}")
    return push(source, open_registry(args.registry, must_exist=False, auth=registry_auth(args)), out)


def _pull(args: argparse.Namespace, spark: Any, out: TextIO, err: TextIO) -> int:
    registry = open_registry(args.registry, auth=registry_auth(args))
    return pull(registry, Path(args.directory), args.subject or None, out)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark-contracts",
        description="Lint, apply and sync Confluent Schema Registry data contracts on Spark.",
    )
    parser.add_argument("--debug", action="store_true", help="on failure, print the traceback too")
    parser.add_argument("--version", action="version", version=f"spark-contracts {__version__}")
    # Also accepted after the command; SUPPRESS keeps a subcommand from resetting it when absent.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lint = commands.add_parser(
        "lint",
        parents=[common],
        help="parse every contract version and compile every rule; report every problem",
        description="Report every problem loading would hit, one per line; exit 1 when there are any.",
    )
    lint.add_argument("directory", nargs="?", help="a LocalRegistry directory (<subject>/<version>.json)")
    lint.add_argument("--registry", help="a registry URL (or directory) instead of DIR")
    add_registry_auth_arguments(lint)
    lint.add_argument("--subject", action="append", help="a subject to lint (repeatable; default: all)")
    add_protobuf_message_argument(lint)  # Protobuf subjects' versions only
    lint.set_defaults(handler=_lint)

    apply = commands.add_parser(
        "apply",
        parents=[common],
        help="run a contract's rules over a dataset or table, writing valid rows and the DLQ",
        description="Valid rows are written as Parquet to --output, rejected rows to the DLQ topics."
        " The contract is loaded and checked before Spark starts.",
    )
    apply.add_argument("--registry", required=True, help="a LocalRegistry directory or a registry URL")
    add_registry_auth_arguments(apply)
    apply.add_argument(
        "--subject",
        required=True,
        help="the subject whose contract runs, as the registry names it (e.g. orders-value for topic"
        " orders' values)",
    )
    apply.add_argument("--version", type=int, help="the contract version (default: the latest)")
    apply.add_argument(
        "--use-latest-with-metadata",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="target the latest version whose metadata properties hold KEY=VALUE (repeatable), as"
        " Confluent's use.latest.with.metadata",
    )
    apply.add_argument(
        "--mode",
        required=True,
        type=str.upper,
        choices=("WRITE", "READ"),
        help="which rules run: WRITE (as a producer runs them before writing a record) or READ (as a"
        " consumer does after reading one, with migrations from the writer's version)",
    )
    apply.add_argument("--input", help="the input dataset: a file, a directory or a glob")
    apply.add_argument(
        "--table",
        metavar="NAME",
        help="a table of Spark's catalog (e.g. a Delta table) to read instead of --input",
    )
    apply.add_argument(
        "--format",
        choices=FORMATS,
        help="parquet / json (JSON lines) / csv (with a header line): records as columns;"
        " avro-parquet / avro-json: Confluent wire-format frames in a binary `value` column (base64"
        " in JSON lines), read with --mode READ; required with --input (default with --table: parquet,"
        " its rows as records)",
    )
    apply.add_argument(
        "--unreadable-dlq",
        metavar="TOPIC",
        help="send each input line that does not parse as a record (json, csv) and each frame that"
        " does not decode (avro-*) to this DLQ topic, the line or frame as its value; by default the"
        " first one fails the run, naming it",
    )
    apply.add_argument(
        "--key-subject",
        help="wire-format input: decode the `key` column first with this subject's contract (e.g."
        " TOPIC-key), its record as a `key` struct; rows its rules reject go to its DLQ",
    )
    add_protobuf_message_argument(apply)
    apply.add_argument("--output", help="where the valid rows go (Parquet); required unless --dry-run")
    apply.add_argument(
        "--output-mode",
        choices=OUTPUT_MODES,
        default="error",
        help="when --output exists: error (the default: stop before Spark starts), overwrite it, or"
        " append to it",
    )
    apply.add_argument(
        "--dlq-dir",
        default=DEFAULT_DLQ_DIR,
        help=f"the local DLQ topics directory, one subdirectory per topic (default: ./{DEFAULT_DLQ_DIR})",
    )
    apply.add_argument(
        "--run-id",
        help="rerun the run of this id (printed when a run fails): its DLQ records and --output are"
        " replaced, not added to (default: a new run id)",
    )
    apply.add_argument(
        "--allow-unknown-rule-types",
        action="store_true",
        help="run even when a rule's type has no executor (that rule fails every record); by default"
        " such a contract is reported and not run",
    )
    add_plugin_arguments(apply)
    add_rule_config_arguments(apply)
    apply.add_argument(
        "--dry-run",
        action="store_true",
        help="run the rules but write nothing (no output, no DLQ records): print the per-rule"
        " summary, the valid and rejected rows per DLQ topic and a sample of rejected rows"
        " (record input only: parquet, json, csv, a table)",
    )
    apply.add_argument(
        "--sample",
        type=_count,
        metavar="N",
        help=f"with --dry-run: rejected rows to print with their rule and reason (default {DEFAULT_SAMPLE})",
    )
    apply.add_argument(
        "--max-rejected",
        type=_reject_limit,
        metavar="N|P%",
        help="exit 1 when the run rejects more than N rows, or more than P percent of the input rows"
        " (without --dry-run the output and DLQ records are written all the same)",
    )
    apply.set_defaults(handler=_apply)

    push_ = commands.add_parser(
        "push",
        parents=[common],
        help="register every contract version of a directory with a registry",
        description="Versions already registered are skipped; refused ones are reported; exit 1 if any.",
    )
    push_.add_argument("directory", help="a LocalRegistry directory")
    push_.add_argument("--registry", required=True, help="the registry URL")
    add_registry_auth_arguments(push_)
    push_.set_defaults(handler=_push)

    pull_ = commands.add_parser(
        "pull",
        parents=[common],
        help="export a registry's subjects into a LocalRegistry directory",
        description="Every version (schema, metadata, ruleSet, references, id) in <subject>/<version>.json.",
    )
    pull_.add_argument("directory", help="the directory to write")
    pull_.add_argument("--registry", required=True, help="the registry URL")
    add_registry_auth_arguments(pull_)
    pull_.add_argument("--subject", action="append", help="a subject to export (repeatable; default: all)")
    pull_.set_defaults(handler=_pull)

    add_dlq_command(commands, [common], new_session)
    return parser
