"""Generate the C source of the cffi extension parataxis._parataxis (API mode).

Run at build time by bindings/python/CMakeLists.txt:
    python _build_ffi.py OUT.c [core/include/parataxis.h]
CMake then compiles OUT.c and _pxpy.c (the binding's own C) into one Python
module under the project's warnings and links it to libparataxis.so.  The cdef
is generated from parataxis.h (the whole C API, never restated by hand), the
declarations of _pxpy.h, and the Python functions that C calls.
"""
import os
import re
import sys

import cffi

# The C API's declarations, generated from the header (the reference): its
# text without comments, PX_API and the C++ guard, each integer #define as a
# constant whose value the compiler gives ("..."); other preprocessor lines
# (the include guard, function-like macros) are left out.
API_HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "..", "..", "..", "core", "include", "parataxis.h")
_CONSTANT = re.compile(r"#\s*define\s+(PX_\w+)\s+\(?-?\d+u?\)?\s*$")


def header_cdef(path: str = API_HEADER) -> str:
    with open(path) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    text = re.sub(r"#ifdef __cplusplus\n.*?#endif\n", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        if not line.lstrip().startswith("#"):
            out.append(re.sub(r"\bPX_API\s+", "", line))
        elif _CONSTANT.match(line.strip()):
            out.append(_CONSTANT.sub(r"#define \1 ...", line.strip()))
    return "\n".join(line for line in out if line.strip()) + "\n"

# The C half's own declarations: the cdef part of _pxpy.h (see there).
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_pxpy.h")


def pxpy_cdef(path: str = HEADER) -> str:
    with open(path) as f:
        text = f.read()
    begin, end = "/* cdef: begin */", "/* cdef: end */"
    return text[text.index(begin) + len(begin):text.index(end)]


# The gate's fields are C11 atomics, which cffi cannot read: it learns the
# struct's size from the compiler (_pxpy.h defines it), so that Python can own
# a gate's memory (ffi.new; see _new_gate in _core.py).
GATE = r"""
struct pxpy_gate { ...; };
"""

# Python functions that C calls: compiled by cffi, defined in _core.py.  The
# "Python+C" ones are called by _pxpy.c too (declared in _pxpy.h); pxpy_post is
# taken from Python as a px_executor's post.
EXTERN_PYTHON = r"""
extern "Python+C" void pxpy_handler(uintptr_t key, int status);
extern "Python" int pxpy_post(void *ctx, px_handler_fn fn, void *arg, int status);
"""

# _pxpy.c is compiled next to what cffi generates (bindings/python/CMakeLists.txt),
# under the project's warnings: the module's init function is declared first for
# -Wmissing-prototypes (cffi defines it without a prototype).
SOURCE = '#include "_pxpy.h"\nPyMODINIT_FUNC PyInit__parataxis(void);\n'


def make_ffi(api_header: str = API_HEADER) -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(header_cdef(api_header) + pxpy_cdef() + GATE + EXTERN_PYTHON)
    ffi.set_source("parataxis._parataxis", SOURCE)
    return ffi


if __name__ == "__main__":
    make_ffi(*sys.argv[2:3]).emit_c_code(sys.argv[1])
