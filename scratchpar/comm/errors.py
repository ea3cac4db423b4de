"""The errors of the communication layer, each with a message that says what to do."""


class CommError(RuntimeError):
    """A communication call was given arguments it cannot serve (raised before any message)."""


class WaitTimeout(CommError):
    """A blocking wait passed its deadline; the message names the operation and the peer."""


class MessageError(CommError):
    """MPI failed a message (say, truncated: more bytes arrived than the buffer holds); the
    message names it and gives MPI's reason."""


class CollectiveMismatch(CommError):
    """Ranks called different collectives, shapes or dtypes (found in debug mode), or met in
    different metadata exchanges; raised on every rank, naming each rank's call."""
