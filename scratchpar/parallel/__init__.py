"""The parallel strategies, by family. Each wraps a single-device model and optimizer and offers
the training-step protocol of :class:`~scratchpar.parallel.strategy.Strategy`.

    one device, the spec          single.py             SingleDevice
    data parallel                 dp.py                 DataParallelNaive, DataParallel
                                  dp_graph.py           CapturedDataParallel (a CUDA graph)
    local SGD                     local_sgd.py          LocalSGD
    parameter servers             ps/                   SyncParameterServer, LockedParameterServer,
                                                        AsyncParameterServer (Downpour),
                                                        SSPParameterServer, SyncThenAsync
    Hogwild                       hogwild/              Hogwild, LockedHogwild
    elastic averaging             easgd/                SyncEASGD, AsyncEASGD, RoundRobinEASGD
    branches                      branches.py           ParallelBranches
    pipelines                     pipeline/             Pipeline, PipeDream
    tensor parallel               tensor/               tensor_parallel
    hybrid dp × pp × tp           hybrid.py             Hybrid
    ZeRO and offload              zero/                 ZeRO1, ZeRO2, ZeRO3

The communication they are built from: differentiable collectives in dual pairs (duals.py).
"""

from .branches import ParallelBranches
from .dp import DataParallel, DataParallelNaive
from .dp_graph import CapturedDataParallel
from .easgd import AsyncEASGD, RoundRobinEASGD, SyncEASGD
from .hogwild import Hogwild, LockedHogwild
from .hybrid import Hybrid
from .local_sgd import LocalSGD
from .pipeline import PipeDream, Pipeline
from .ps import (
    AsyncParameterServer,
    LockedParameterServer,
    SSPParameterServer,
    SyncParameterServer,
    SyncThenAsync,
)
from .single import SingleDevice
from .tensor import tensor_parallel
from .zero import ZeRO1, ZeRO2, ZeRO3

__all__ = ["AsyncEASGD", "AsyncParameterServer", "CapturedDataParallel", "DataParallel",
           "DataParallelNaive", "Hogwild", "Hybrid", "LocalSGD", "LockedHogwild",
           "LockedParameterServer", "ParallelBranches", "PipeDream", "Pipeline",
           "RoundRobinEASGD", "SSPParameterServer", "SingleDevice", "SyncEASGD",
           "SyncParameterServer", "SyncThenAsync", "ZeRO1", "ZeRO2", "ZeRO3", "tensor_parallel"]
