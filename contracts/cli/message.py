"""`--protobuf-message`: the option choosing a Protobuf contract's record message, for the commands
that build a contract."""

from __future__ import annotations

import argparse


def add_protobuf_message_argument(parser: argparse.ArgumentParser) -> None:
    """Add `--protobuf-message NAME` (DataContract's `protobuf_message`) to a command."""
    parser.add_argument(
        "--protobuf-message",
        metavar="NAME",
        help="a Protobuf contract's record message by full name (e.g. acme.Outer.Inner), when its"
        " records are not the file's first message",
    )
