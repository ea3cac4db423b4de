"""The errors of the communication layer, each with a message that says what to do."""


class CommError(RuntimeError):
    """A communication call was given arguments it cannot serve (raised before any message)."""


class WaitTimeout(CommError):
    """A blocking wait passed its deadline; the message names the operation and the peer."""


class CollectiveMismatch(CommError):
    """Debug mode found ranks calling different collectives, shapes or dtypes."""
