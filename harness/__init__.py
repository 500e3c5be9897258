"""Profile ML models under an edge device's CPU and memory limits.

Two faces. For notebooks and search loops, the harness as a library (API lists it): `harness.profile(models,
device="raspberry-pi-4")` returns a Session; `harness.predict`, `harness.rank` and `harness.compare` return typed
results; errors are harness.HarnessError and its kinds. For bench scripts: `from harness import phase,
report_metrics, timed_loop, random_input, ...` (FACE lists them).
Each name is imported when a script first asks for it (PEP 562), so `import harness`, which the runner and every
bench script pay for inside the run's limits, loads nothing more; random_input alone brings numpy.

The modules' former names (FORMER_NAMES) stay importable for scripts written against them: `import harness.metrics`
gives the module it names now, the same object, through a finder placed after the standard ones.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:  # the public names' real types, for checkers and IDEs; at runtime __getattr__ imports them
    from importlib.machinery import ModuleSpec
    from types import ModuleType

    # `name as name`: an explicit re-export, which __all__ (built from the tables) cannot show a linter
    from harness.api.calibrating import regress as regress
    from harness.api.predicting import predict as predict
    from harness.api.predictors import load_predictor as load_predictor
    from harness.api.profiling import open_session as open_session
    from harness.api.profiling import profile as profile
    from harness.api.queries import compare as compare
    from harness.api.queries import rank as rank
    from harness.api.queries import rank_on_device as rank_on_device
    from harness.api.session import Session as Session
    from harness.calibration.prediction import Prediction as Prediction
    from harness.core.errors import BackendError as BackendError
    from harness.core.errors import ConfigError as ConfigError
    from harness.core.errors import DataError as DataError
    from harness.core.errors import HarnessError as HarnessError
    from harness.core.errors import ModelError as ModelError
    from harness.core.errors import StorageError as StorageError

__version__ = "0.1.0"

_PROTOCOL, _LOOP = "harness.measure.report_protocol", "harness.measure.benchloop"
FACE = {
    "phase": (_PROTOCOL, "phase"), "report_metrics": (_PROTOCOL, "report"),
    "report_latencies": (_PROTOCOL, "report_latencies"),
    **{name: (_LOOP, name) for name in ("parse_args", "parse_pairs", "resolve_shape", "timed_load", "timed_loop",
                                        "profile_dir", "profiled_loop", "write_profile_meta")},
    **{name: ("harness.measure.bench_inputs", name) for name in ("random_input", "input_values", "given_inputs")},
    "param_layers": ("harness.measure.ncnn_param", "param_layers"),
}
"""Public name -> (the module that defines it, its name there), all on the bench-script side (harness/measure/).
The protocol's report() is report_metrics here: harness.report is the package of reports."""
_ERRORS = "harness.core.errors"
API = {
    **{name: ("harness.api.profiling", name) for name in ("profile", "open_session")},
    **{name: ("harness.api.queries", name) for name in ("rank", "rank_on_device", "compare")},
    "predict": ("harness.api.predicting", "predict"), "regress": ("harness.api.calibrating", "regress"),
    "load_predictor": ("harness.api.predictors", "load_predictor"),
    "Prediction": ("harness.calibration.prediction", "Prediction"),
    "Session": ("harness.api.session", "Session"),
    **{name: (_ERRORS, name) for name in ("HarnessError", "ConfigError", "ModelError", "BackendError", "DataError",
                                          "StorageError")},
}
"""Public name -> its module, for Python users (harness/api/): what the CLI's commands call and print."""
FORMER_NAMES = {"harness.benchloop": _LOOP, "harness.metrics": _PROTOCOL, "harness.report_protocol": _PROTOCOL}
"""A module's earlier name -> its module now."""
__all__ = ["__version__", *FACE, *API]


def __getattr__(name: str) -> object:
    """A face name, imported from its module on first use and kept here."""
    found = FACE.get(name) or API.get(name)
    if found is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    from importlib import import_module

    module, attribute = found
    value = getattr(import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *FACE, *API})


class FormerNameFinder:
    """Imports a former name as the module it names now: the module loaded under the former name replaces itself in
    sys.modules with the real one, which the import system then hands back (as a module may do while it runs)."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname not in FORMER_NAMES:
            return None
        from importlib.machinery import ModuleSpec

        # Any object with create_module and exec_module loads; the stubs ask for importlib.abc.Loader, whose import
        # brings re and typing into every bench script that names a former module.
        return ModuleSpec(fullname, FormerNameFinder)  # type: ignore[arg-type]

    @staticmethod
    def create_module(spec: ModuleSpec) -> None:
        return None  # the default module, which exec_module replaces

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        from importlib import import_module

        sys.modules[module.__name__] = import_module(FORMER_NAMES[module.__name__])


sys.meta_path.append(FormerNameFinder)
