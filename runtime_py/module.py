"""Module: the convenience wrapper (program plus methods, all loaded on first use).

    module = runtime_py.load("model.rtp")
    (y,) = module.forward(x)
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._files import write_atomically
from .errors import ClosedError, InvalidArgument, InvalidState
from .method import Method, MethodMeta
from .program import Program, data_file_paths

__all__ = ["Module", "load"]

_LOGGER = logging.getLogger("runtime_py")

_METHOD_OPTIONS = ("device", "num_threads", "profile", "memory_limit", "max_steps",
                   "clone_outputs")


class Module:
    """A program and its methods, each loaded lazily with the same method options.

    forward() and run_method() are safe to call from many threads at once: each call takes an
    idle instance of the method, loading another when every instance is busy (so a Module
    holds as many instances of a method as it saw concurrent calls, each with its own memory).
    With clone_outputs=False their outputs are views into the instance that ran the call,
    valid until that instance runs again, which may be another thread's next call: copy what
    must outlive it. load_method() gives the method's first instance, which forward() also
    uses when it is idle; a Method itself is one thread at a time."""

    def __init__(self, source: Any, *, copy: Optional[bool] = None,
                 verify_constants: bool = False, data_files: Any = (),
                 **method_options: Any) -> None:
        unknown = sorted(set(method_options) - set(_METHOD_OPTIONS))
        if unknown:
            raise TypeError(f"unknown method option(s) {', '.join(unknown)}; "
                            f"expected some of {', '.join(_METHOD_OPTIONS)}")
        if isinstance(source, (str, os.PathLike)):
            source = os.path.abspath(os.fsdecode(source))  # a pickle may load it elsewhere
        self._source = source
        self._load_options = {"copy": copy, "verify_constants": verify_constants,
                              "data_files": data_file_paths(data_files)}
        self._method_options = method_options
        self._program: Optional[Program] = None
        self._lock = threading.Lock()
        self._methods: Dict[str, Method] = {}  # the first instance of each method
        self._idle: Dict[str, List[Method]] = {}  # instances no call is using
        self._closed = False

    def _closed_error(self) -> ClosedError:
        return ClosedError("operation on closed module")

    @property
    def program(self) -> Program:
        """The Program, loaded on first use."""
        with self._lock:
            if self._closed:
                raise self._closed_error()
            if self._program is None:
                self._program = Program.load(self._source, **self._load_options)
                self._source = None  # the Program keeps what it borrows
            return self._program

    @property
    def method_names(self) -> Tuple[str, ...]:
        return self.program.method_names

    def method_meta(self, name: str = "forward") -> MethodMeta:
        return self.program.method_meta(name)

    def _acquire(self, name: str) -> Method:
        """An idle instance of method `name`, loading one when there is none."""
        with self._lock:
            if self._closed:
                raise self._closed_error()
            idle = self._idle.get(name)
            if idle:
                return idle.pop()
        method = self.program.load_method(name, **self._method_options)
        with self._lock:
            self._methods.setdefault(name, method)
            if not self._closed:
                return method
        method.close()
        raise self._closed_error()

    def _release(self, name: str, method: Method) -> None:
        """Give back an instance _acquire gave: idle again, or closed if the module is."""
        with self._lock:
            if not self._closed:
                self._idle.setdefault(name, []).append(method)
                return
        method.close()

    def load_method(self, name: str = "forward") -> Method:
        """The first loaded instance of method `name` (loaded once, then cached)."""
        with self._lock:
            method = self._methods.get(name)
            if self._closed:
                raise self._closed_error()
        if method is None:
            self._release(name, self._acquire(name))
            method = self._methods[name]
        return method

    def run_method(self, name: str, inputs: Sequence[Any] = ()) -> List[Any]:
        """Bind `inputs`, execute method `name` and return its outputs (thread-safe: see the
        class)."""
        method = self._acquire(name)
        try:
            return method(*inputs)
        finally:
            self._release(name, method)

    def bundled_tests(self, name: str = "forward") -> List[Any]:
        """The test cases bundled with method `name` (Program.bundled_tests)."""
        return self.program.bundled_tests(name)

    def verify_bundled(self, method: str = "forward", index: int = 0, rtol: float = 1e-5,
                       atol: float = 1e-8) -> Any:
        """Run bundled case `index` of `method` on the module's loaded method and compare its
        outputs (Method.verify_bundled; the argument order of ExecuTorch's
        verify_result_with_bundled_expected_output)."""
        return self.load_method(method).verify_bundled(index, rtol=rtol, atol=atol)

    def forward(self, *inputs: Any) -> List[Any]:
        """run_method("forward", inputs)."""
        return self.run_method("forward", inputs)

    __call__ = forward

    def __reduce__(self) -> Any:
        """Pickled with its program (by path for a file, by bytes for a buffer; see
        Program.__reduce__) and its options; methods load again lazily on the other side."""
        with self._lock:
            if self._closed:
                raise ClosedError("cannot pickle a closed module")
            source = self._program if self._program is not None else self._source
        if not isinstance(source, (str, Program)):
            view = memoryview(source)
            source = view.tobytes()
        # A pickled buffer arrives as new bytes, so copy=False no longer applies.
        options = dict(self._method_options)
        return _unpickle_module, (source, self._load_options["verify_constants"], options,
                                  self._load_options["data_files"])

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the module (idempotent): calls that start later raise ClosedError; idle
        method instances are closed now, those running a call when that call ends, and the
        program once none needs it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle = [m for methods in self._idle.values() for m in methods]
            self._idle.clear()
            program, self._program, self._source = self._program, None, None
        for method in idle:
            try:
                method.close()
            except InvalidState:  # load_method's instance, in a caller's own hands now
                pass
        if program is not None:
            program.close()  # methods keep what they use of it

    def __enter__(self) -> "Module":
        if self._closed:
            raise self._closed_error()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._closed:
            return "Module(closed)"
        loaded = ", ".join(repr(name) for name in self._methods)
        return f"Module(program={'loaded' if self._program else 'not loaded'}, methods=[{loaded}])"


def load(source: Any, *, copy: Optional[bool] = None, verify_constants: bool = False,
         data_files: Any = (), cache: bool = False,
         input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
         dynamic_bounds: Optional[Mapping[str, Any]] = None,
         value_bounds: Optional[Mapping[str, Sequence[float]]] = None,
         **method_options: Any) -> Module:
    """A Module for a program file or buffer (and the data files holding its external
    constants); method_options go to every load_method().

    input_shapes, dynamic_bounds and value_bounds go to the ONNX importer (see
    runtime_py.onnx.convert): fixed sizes for inputs the model leaves symbolic, upper bounds
    that make input axes dynamic, e.g. {"input_ids": {0: 8, 1: 512}}, and the range of inputs
    whose contents give sizes, e.g. {"shape": (-1, 64)}. They are refused for a program of ours
    or a .pte, whose shapes are already decided.

    An ExecuTorch program (.pte) or an ONNX model is *converted* first, by the importer that
    recognises the file's header (importers register in _importers.py). That runs a compiler,
    hundreds of times slower than loading a converted program, and is logged at INFO on the
    "runtime_py" logger. Convert once with `python -m runtime_py convert`, or
    pass cache=True for a model file: the converted program is then written beside it as
    `<file>.rtp` (atomically) and reused while it is newer than the model."""
    from ._importers import importer_for, registered

    options = {k: v for k, v in (("input_shapes", input_shapes),
                                 ("dynamic_bounds", dynamic_bounds),
                                 ("value_bounds", value_bounds)) if v is not None}
    importer = importer_for(source)
    if options and (importer is None or not set(options) <= set(importer.options)):
        takers = " or ".join(i.name for i in registered() if set(options) <= set(i.options))
        what = importer.what if importer is not None else "a program of ours"
        raise InvalidArgument(f"load: {' and '.join(options)} apply to {takers or 'no'} models "
                              f"only; the source is {what}, whose shapes are already decided")
    if importer is not None:
        source = _converted(source, importer, cache, options)
    return Module(source, copy=copy, verify_constants=verify_constants, data_files=data_files,
                  **method_options)


def _converted(source: Any, importer: Any, cache: bool, options: Mapping[str, Any]) -> Any:
    """The program of a model of another format: read from its cache when asked and fresh,
    else converted (and cached when asked). A conversion with importer options is cached
    under a name of its own (`<file>.<digest of the options>.rtp`)."""
    is_path = isinstance(source, (str, os.PathLike))
    what = os.fspath(source) if is_path else f"a {memoryview(source).nbytes}-byte buffer"
    suffix = ".rtp"
    if options:
        digest = hashlib.sha256(repr(sorted((k, _plain(v)) for k, v in options.items()))
                                .encode()).hexdigest()[:12]
        suffix = f".{digest}.rtp"
    cached = os.fspath(source) + suffix if cache and is_path else None
    if cache and not is_path:
        raise TypeError("load(cache=True) needs a model file to cache beside, not a buffer")
    if cached is not None:
        try:
            if os.stat(cached).st_mtime_ns >= os.stat(source).st_mtime_ns:
                _LOGGER.info("runtime_py.load: %s: using the converted program %s", what,
                             cached)
                return cached
        except OSError:
            pass  # no cache yet (or no model: the conversion says so)
    _LOGGER.info("runtime_py.load: converting %s (%s) to a program%s", what, importer.name,
                 f", cached as {cached}" if cached else
                 "; convert once with `python -m runtime_py convert` or load(cache=True)")
    program = importer.convert(source, **options)
    if cached is None:
        return program
    write_atomically(cached, program)  # a process serving the old cache keeps its bytes
    return cached


def _plain(value: Any) -> Any:
    """Options as sorted plain data, so that equal options give one cache name."""
    if isinstance(value, Mapping):
        return sorted((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return int(value) if isinstance(value, int) or hasattr(value, "__index__") else value


def _unpickle_module(source: Any, verify_constants: bool, method_options: Dict[str, Any],
                     data_files: Sequence[str] = ()) -> Module:
    if isinstance(source, Program):
        module = Module(None, verify_constants=verify_constants, data_files=data_files,
                        **method_options)
        module._program = source
        module._source = None
        return module
    return Module(source, verify_constants=verify_constants, data_files=data_files,
                  **method_options)
