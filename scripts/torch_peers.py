"""How a PyTorch twin runs as one of the benchmark peers: shared by scripts/torch_reference.py (bench_train.sh),
scripts/torch_real.py (bench_real.sh) and scripts/torch_decode.py (bench_decode.sh).

--peer eager     plain PyTorch (the only peer PyTorch 1.13 runs);
--peer compile   torch.compile in its default mode (dynamic=None: a first shape is compiled static, a size that
                 changes later is recompiled as dynamic), around the forward (and, through AOTAutograd, its
                 backward); what the twin does between forwards (the optimizer, the beam search's bookkeeping)
                 stays eager;
--peer ipex      intel_extension_for_pytorch.optimize(): the model with its optimizer when training, the model
                 in eval mode when decoding;
--precision bf16 the forward under torch.autocast("cpu", torch.bfloat16) (torch.compile traces it under
                 autocast), IPEX's optimize() with dtype bf16; f32 (the default) neither.
compile and ipex need PyTorch 2 (scripts/setup_peers.sh: torch-latest for eager and compile, torch-ipex for ipex).
"""
import contextlib
import sys
import time

import torch


def add_arguments(parser):
    parser.add_argument("--peer", choices=["eager", "compile", "ipex"], default="eager",
                        help="eager PyTorch, torch.compile (default mode) or IPEX's optimize()")
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                        help="bf16: the forward under torch.autocast('cpu', torch.bfloat16)")


def check_arguments(parser, args):
    if args.peer != "eager" and int(torch.__version__.split(".")[0]) < 2:
        parser.error(f"--peer {args.peer} needs PyTorch 2 (scripts/setup_peers.sh's torch-latest or torch-ipex); this is torch {torch.__version__}")


def optimize(model, peer, precision, result, optimizer=None):
    """(model, optimizer) as the peer runs them: IPEX's optimize() for ipex (a copy of the model, so what
    held the model before, such as its parameters' list, must be taken again), else as they are. Training
    passes the optimizer with the model in train mode, decoding none with the model in eval mode. Notes
    the peer, the precision and IPEX's version in result."""
    result.update({"peer": peer, "precision": precision})
    if peer != "ipex":
        return model, optimizer
    import intel_extension_for_pytorch as ipex
    result["ipex"] = ipex.__version__
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    if optimizer is None:
        return ipex.optimize(model, dtype=dtype), None
    return ipex.optimize(model, optimizer=optimizer, dtype=dtype)


def forward(function, peer, precision, result):
    """function as the peer calls it: compiled for compile (function itself, so that each function keeps
    its own TorchDynamo cache and config.cache_size_limit), called under bf16 autocast for precision bf16."""
    bf16 = precision == "bf16"
    if peer == "compile":
        if bf16 and torch.__version__.startswith("2.5."):
            # torch 2.5's ATen/cpu/vec/vec_n.h declares VectorizedN's fmadd with two operands, so Inductor's
            # vectorized fma (softmax's backward on bf16-autocast scores: VectorizedN<float, 2>) does not
            # compile (CppCompileError); emitted as a product and a sum instead.
            from torch._inductor.codegen.cpp import CppVecOverrides
            CppVecOverrides.fma = staticmethod(lambda x, y, z: f"(({x}) * ({y}) + ({z}))")
            result["inductor_patch"] = "vectorized fma as product + sum"
        function = torch.compile(function)

    def run(*args):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return function(*args)

    return run


def graphs_compiled():
    """Graphs TorchDynamo has compiled in this process (0 while it is not even imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return utils.counters["stats"]["unique_graphs"] if utils else 0


class Timer:
    """Times the units of a run (training steps, decoded batches), each with its work (1 a step, its articles
    a batch), and notes the units during which TorchDynamo compiled a graph: for torch.compile, whose varying
    shapes recompile, the compile time is reported apart.

        timer = Timer()
        for ...:
            with timer.unit(work):
                ...
        timer.report(result)
    """

    def __init__(self):
        self.seconds, self.work, self.compiling = [], [], []
        self.graphs_before = graphs_compiled()

    @contextlib.contextmanager
    def unit(self, work=1):
        graphs, start = graphs_compiled(), time.perf_counter()
        yield
        self.seconds.append(time.perf_counter() - start)
        self.work.append(work)
        if graphs_compiled() > graphs:
            self.compiling.append(len(self.seconds) - 1)

    def report(self, result):
        """For a run that compiled: the units that compiled a graph (0-based), their seconds, the graphs
        compiled before and during the units, the frames TorchDynamo gave up on (run eager: a graph break it
        cannot resume, config.cache_size_limit recompiles reached), and the seconds of all the units at the
        rate of those that compiled nothing (their work over their seconds)."""
        if graphs_compiled() == 0:
            return
        from torch._dynamo.utils import counters
        quiet = [i for i in range(len(self.seconds)) if i not in self.compiling]
        quiet_seconds = sum(self.seconds[i] for i in quiet)
        result.update({"compiling_units": self.compiling,
                       "compiling_seconds": sum(self.seconds[i] for i in self.compiling),
                       "graphs_before": self.graphs_before, "graphs": graphs_compiled() - self.graphs_before,
                       "frames_left_eager": counters["frames"]["total"] - counters["frames"]["ok"],
                       "cache_size_limit": torch._dynamo.config.cache_size_limit})
        if quiet and quiet_seconds > 0:
            result["seconds_without_compiling"] = sum(self.work) * quiet_seconds / sum(self.work[i] for i in quiet)
