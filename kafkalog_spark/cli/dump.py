"""``kafkalog dump`` (entry-point layer): ``kafka-dump-log.sh`` without a JVM, read-only.

Takes DumpLogSegments' options under their Kafka names, so existing command lines keep working
(``kafkalog dump --files 00000000000000000000.log --deep-iteration``); the formatting lives in
:mod:`kafkalog_spark.inspect.dump`. Read-only: exit code 0 when every file was dumped (mismatch
reports included, as Kafka), 2 when a file could not be dumped completely or the options are
bad (an error, as for every command; the files that could be dumped are still printed).
"""

from __future__ import annotations

import sys

import click

from ..errors import InvalidOptionError
from ..inspect.dump import STRING_DECODER_CLASSES, dump_files
from ..inspect.dump_options import DEFAULT_MAX_MESSAGE_SIZE, FORMATS, JAVA_INT_MAX, DumpOptions
from ..storage import LOCAL, as_path
from ..storage.paths import is_remote
from ..tiered.tier import as_remote_tier
from .options import refuse_symlinked_files, remote_tier_options, storage_option
from .progress import Progress, plain_files, progress_option


def _decoder_class(option: str, value: str | None) -> None:
    if value is not None and value not in STRING_DECODER_CLASSES:
        raise InvalidOptionError(f"{option}: only the string decoder is available; got {value!r}, "
                                 f"valid: {', '.join(STRING_DECODER_CLASSES)}")


@click.command("dump")
@click.argument("paths", nargs=-1)
@click.option("--files", "files", multiple=True,
              help="Comma-separated data, index, snapshot and checkpoint files (Kafka's REQUIRED "
                   "option; file arguments may be given instead).")
@click.option("--print-data-log", is_flag=True, help="Print record keys and values.")
@click.option("--deep-iteration", is_flag=True,
              help="Print every record, not only batches (implied by --print-data-log).")
@click.option("--verify-index-only", is_flag=True,
              help="Check .index/.timeindex entries against the log without printing them.")
@click.option("--index-sanity-check", is_flag=True,
              help="Only run the broker's start-up sanity check on .index/.timeindex files.")
@click.option("--max-message-size", type=click.IntRange(0, JAVA_INT_MAX),
              default=DEFAULT_MAX_MESSAGE_SIZE, show_default=True,
              help="Bytes read at each offset-index position.")
@click.option("--max-bytes", type=click.IntRange(0, JAVA_INT_MAX), default=JAVA_INT_MAX,
              help="Read only the first N bytes of each .log/.checkpoint file.")
@click.option("--key-decoder-class", default=None, help="Key decoder; only StringDecoder.")
@click.option("--value-decoder-class", default=None, help="Value decoder; only StringDecoder.")
@click.option("--offsets-decoder", is_flag=True, help="Decode __consumer_offsets records as JSON.")
@click.option("--transaction-log-decoder", is_flag=True,
              help="Decode __transaction_state records as JSON.")
@click.option("--cluster-metadata-decoder", is_flag=True,
              help="Decode KRaft __cluster_metadata record values as JSON.")
@click.option("--remote-log-metadata-decoder", is_flag=True,
              help="Decode tiered storage's __remote_log_metadata record values.")
@click.option("--skip-record-metadata", is_flag=True,
              help="Print no record metadata (also no control record details).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text: kafka-dump-log.sh lines; jsonl: one JSON object per batch, record, "
                   "index entry and report item.")
@storage_option
@remote_tier_options
@progress_option
def command(paths: tuple[str, ...], files: tuple[str, ...], print_data_log: bool,
            deep_iteration: bool, verify_index_only: bool, index_sanity_check: bool,
            max_message_size: int, max_bytes: int, key_decoder_class: str | None,
            value_decoder_class: str | None, offsets_decoder: bool,
            transaction_log_decoder: bool, cluster_metadata_decoder: bool,
            remote_log_metadata_decoder: bool, skip_record_metadata: bool, fmt: str,
            storage_options: dict[str, str] | None, remote_tier: str | None,
            remote_tier_layout: str | None, remote_tier_private_key: tuple[str, ...],
            progress: bool | None) -> None:
    """Dump .log, .index, .timeindex, .txnindex, .snapshot and KRaft .checkpoint files the way
    kafka-dump-log.sh (Kafka 4.x) prints them. Never changes a file. With --remote-tier a
    partition dir dumps its remote segments first, and a tier's copies can be named too."""
    _decoder_class("--key-decoder-class", key_decoder_class)
    _decoder_class("--value-decoder-class", value_decoder_class)
    targets = [f for group in files for f in group.split(",") if f] + list(paths)
    if not targets:
        raise click.UsageError("give files to dump: --files a.log,b.index or file arguments")
    missing = [t for t in targets if not is_remote(t) and not LOCAL.exists(t)]
    if missing:  # a typo is an error, not an "Ignoring unknown file" and exit 0
        raise click.BadParameter(f"{missing[0]!r} does not exist", param_hint="PATHS / --files")
    refuse_symlinked_files(targets, allow_named_link=True)
    targets = [as_path(t, storage_options) if is_remote(t) else t for t in targets]
    # decoder precedence as in DumpLogSegments.messageParser
    decoder = ("offsets" if offsets_decoder else "transaction-log" if transaction_log_decoder
               else "cluster-metadata" if cluster_metadata_decoder
               else "remote-log-metadata" if remote_log_metadata_decoder else "string")
    options = DumpOptions(
        deep_iteration=deep_iteration,
        print_data_log=(print_data_log or key_decoder_class is not None
                        or value_decoder_class is not None),
        verify_index_only=verify_index_only, index_sanity_check=index_sanity_check,
        max_message_size=max_message_size, max_bytes=max_bytes, decoder=decoder,
        skip_record_metadata=skip_record_metadata, format=fmt,
        remote_tier=as_remote_tier(remote_tier, remote_tier_layout, storage_options,
                                   remote_tier_private_key))
    out = click.get_text_stream("stdout")
    err = click.get_text_stream("stderr")
    with Progress("dump", enabled=progress, files=plain_files(targets), unit="files"):
        report = dump_files(targets, options, out, err)
    out.flush()
    if not report.ok:
        sys.exit(2)
