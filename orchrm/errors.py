"""The one error model: every error orchrm raises for bad input or a bad setting derives
from `OrchrmError`, so the `orchrm` command can tell a user's mistake (one line on
stderr, the exit status of its kind: 2 to 5) from a bug (its traceback, exit status
1). The kinds and their statuses are tabled in docs/robustness.md#exit-status."""

from __future__ import annotations


class OrchrmError(Exception):
    """Something the user gave (a file, a record, a setting, a model directory) cannot be
    used; the message says what and where."""

    exit_code = 2
    """The `orchrm` command's exit status for an error of this kind (the table in
    docs/robustness.md#exit-status)."""


class ConfigError(OrchrmError, ValueError):
    """A setting that cannot work (an unknown choice, a bound crossed, a conflict between
    two settings). Also a `ValueError`, what callers of the configs caught before."""


class InputError(OrchrmError, ValueError):
    """A file or value given as input holds something orchrm cannot use (a task without a
    question, a pair file without its splits); the message names the file and line. Also
    a `ValueError` for callers that catch that."""


class MissingInput(InputError):
    """An input file or folder the user named cannot be read: it does not exist, is a
    folder where a file is expected (or the other way round), or is not readable."""

    exit_code = 3


class UnreadableConfig(ConfigError, MissingInput):
    """A config file the user named that cannot be read (a `ConfigError`, exit status 3)."""


class OutputError(OrchrmError, OSError):
    """An output the user named cannot be written: a read-only location, a folder where
    the file goes, a full disk. The message names the user's path, never a temporary
    file beside it."""

    exit_code = 4


class Busy(OrchrmError):
    """Another process holds what this one needs (a store an ingest is writing to):
    waiting for it to finish, or trying again later, helps."""

    exit_code = 5
