"""fusejit's exceptions and warning category (raised by the C++ layer through ``from_cpp``)."""

from __future__ import annotations

import os
import re
import sys
import warnings

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class _Made:
    # fusejit errors made in this process, by any thread (a trace may catch one its own worker
    # thread made): a trace during which the count moved is told (_fuse._Entry.servable).
    count = 0


_MADE = _Made()


def errors_made() -> int:
    """How many fusejit errors this process has made so far (any thread)."""
    return _MADE.count


class Error(Exception):
    """A ``fusejit::Error`` from the C++ library.

    ``str(e)`` is the rendered diagnostic ("FILE:LINE:COL: error: MESSAGE", the offending line
    and a caret when located; "error: MESSAGE" when not). Attributes: ``kind`` ("user", "compile", "driver", "internal"),
    ``message`` (bare), ``file`` ("" when none), ``line`` and ``column`` (1-based, 0 = unknown),
    ``location`` ("FILE:LINE:COL", or "" when not located), ``diagnostic``.
    """

    kind = "internal"

    def __init__(self, message: str, file: str = "", line: int = 0, column: int = 0, diagnostic: str = ""):
        # As the C++ library renders an unlocated error; a str() or traceback line ends without a
        # blank line.
        diagnostic = diagnostic.rstrip("\n") or f"error: {message}"
        super().__init__(diagnostic)
        _MADE.count += 1
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.diagnostic = diagnostic

    def __reduce__(self):
        # pickle and copy rebuild the error from all its fields (args holds only the diagnostic,
        # which __init__ would take for the message and render again).
        return (type(self), (self.message, self.file, self.line, self.column, self.diagnostic))

    @property
    def location(self) -> str:
        """"FILE:LINE:COL" when the error has a location in graph text, "FILE:LINE" for a line of a
        function traced by fusejit.fuse, else ""."""
        if not self.line:
            return ""
        return f"{self.file}:{self.line}:{self.column}" if self.column else f"{self.file}:{self.line}"

    def _locate_in_caller(self) -> None:
        """An unlocated error raised while fusejit.fuse traced a function: located at the innermost
        line of the traceback outside the fusejit package (the caller's line that built the op)."""
        if self.line:
            return
        frame_line = None
        tb = self.__traceback__
        while tb is not None:
            if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR):
                frame_line = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
            tb = tb.tb_next
        if frame_line is None:
            return
        self.file, self.line = frame_line
        self.diagnostic = f"{self.file}:{self.line}: {self.diagnostic}"
        self.args = (self.diagnostic,)


class UserError(Error, ValueError):
    """Bad graph text, dim, param, tensor (dtype, shape, device) or option: the caller's mistake."""

    kind = "user"


class CompileError(Error):
    """NVRTC or the host C++ compiler rejected generated code (a fusejit bug or a toolchain issue)."""

    kind = "compile"


class DriverError(Error):
    """The CUDA driver failed: no driver or device, out of memory, launch failure."""

    kind = "driver"


class InternalError(Error):
    """A broken invariant inside fusejit: always a bug."""

    kind = "internal"


class FusejitWarning(UserWarning):
    """A warning from the C++ library (e.g. the PTX fallback for a GPU newer than NVRTC)."""


_KINDS = {c.kind: c for c in (UserError, CompileError, DriverError, InternalError)}


def from_cpp(kind: str, message: str, file: str, line: int, column: int, diagnostic: str,
             _kinds: dict = _KINDS, _internal: type = InternalError) -> Error:
    """The Python exception for a C++ fusejit::Error (called by the extension, which holds this
    function from its import on: the classes are bound here, so an importlib.reload of this module
    does not give errors that ``except fusejit.UserError`` misses)."""
    # std::exception::what() is the rendered diagnostic; keep the bare message when it differs.
    return _kinds.get(kind, _internal)(message, file, line, column, diagnostic)


def _module_globals(file: str, origin: int = 0) -> dict | None:
    """The globals of the module whose source is `file` (a frame running it, of this thread or of
    thread `origin`, else a loaded module), for a warning's `module=` filters and once-only
    registry; None if none."""
    frame = sys._current_frames().get(origin) if origin else sys._getframe()
    while frame is not None:
        if frame.f_code.co_filename == file:
            return frame.f_globals
        frame = frame.f_back
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)  # not getattr(__file__): a lazy module would load
        if type(namespace) is dict and namespace.get("__file__") == file:
            return namespace
    return None


# "FILE.py:LINE:COL: " (or FILE.py:LINE) opening a warning about a node built at that Python line.
_PYTHON_LOCATION = re.compile(r"(.+?\.py):(\d+)(?::\d+)?: ")


def _warn(message: str, origin: int = 0, _category: type = FusejitWarning) -> None:
    """Issues ``message`` as a FusejitWarning attributed to the Python line it is about, where it
    opens with one (an op a traced function or a Python GraphBuilder built there), else to the
    caller's line: the first frame outside the fusejit package of this thread, or of thread
    ``origin`` (a threading ident) when the warning comes from a compile worker of that thread's
    call (the C++ layer calls this with the GIL held; that thread waits in the call meanwhile).
    Without such a frame it reads "sys:1"."""
    located = _PYTHON_LOCATION.match(message)
    if located and os.path.isfile(located[1]):  # about a node a Python line built (GraphBuilder.set_location)
        scope = _module_globals(located[1], origin)  # its module's name and registry, as warnings.warn gives
        warnings.warn_explicit(message, _category, located[1], int(located[2]),
                               module=scope.get("__name__") if scope else None,
                               registry=scope.setdefault("__warningregistry__", {}) if scope else None)
        return
    frame = sys._current_frames().get(origin) if origin else sys._getframe().f_back
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        warnings.warn(message, _category, stacklevel=2)
        return
    # As warnings.warn does for a stack level (which passes no module_globals: with them, a
    # `python -c` script's __main__ made linecache fail with ImportError).
    scope = frame.f_globals
    warnings.warn_explicit(message, _category, frame.f_code.co_filename, frame.f_lineno,
                           module=scope.get("__name__", "<string>"),
                           registry=scope.setdefault("__warningregistry__", {}))
