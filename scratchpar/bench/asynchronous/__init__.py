"""The asynchronous benchmark (CLI name async): Hogwild, EASGD against Downpour, round-robin."""
