"""Moved to :mod:`dpfair.cli._support` (kept for :mod:`dpfair.privacy.cli`)."""

from dpfair.cli._support import (
    EXIT_USER_ERROR,
    describe_os_error,
    emit,
    fail,
    fmt,
    json_default,
    run_with_progress,
    user_errors,
)

__all__ = [
    "EXIT_USER_ERROR",
    "describe_os_error",
    "emit",
    "fail",
    "fmt",
    "json_default",
    "run_with_progress",
    "user_errors",
]
