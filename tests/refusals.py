"""The one check of the bad-input suites: a call is refused with an error that says what is wrong."""

import pytest


def assert_refused(call, error: type[BaseException], phrase: str) -> None:
    """``call()`` raises ``error`` whose message contains ``phrase`` (a plain substring, not a regex)."""
    with pytest.raises(error) as info:
        call()
    assert phrase in str(info.value), f"message {str(info.value)!r} lacks {phrase!r}"
