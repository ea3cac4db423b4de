"""The one error a dataset raises when its source cannot be read or used."""


class DataError(ValueError):
    """A data source is missing, unreadable, or unfit for the requested batches."""
