"""The registry of strategies: each ``--strategy`` name, the family that owns it (its flags,
rules and builder), in the order the command line lists them."""

from .data_parallel import BucketFlags, DataParallelFamily
from .easgd import ElasticFamily, ElasticFlags
from .family import Family
from .hogwild import HogwildFamily, HogwildFlags
from .mesh import MeshFamily, MeshFlags
from .ps import ServerFamily, ServerFlags
from .zero import ZeroFamily, ZeroFlags

FAMILIES: tuple[Family, ...] = (DataParallelFamily(), MeshFamily(), ServerFamily(),
                                HogwildFamily(), ElasticFamily(), ZeroFamily())
REGISTRY: dict[str, Family] = {name: f for f in FAMILIES for name in f.names}

__all__ = ["FAMILIES", "REGISTRY", "BucketFlags", "ElasticFlags", "Family", "HogwildFlags",
           "MeshFlags", "ServerFlags", "ZeroFlags"]
