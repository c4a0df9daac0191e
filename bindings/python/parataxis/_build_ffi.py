"""Generate the C source of the cffi extension parataxis._parataxis (API mode).

Run at build time by bindings/python/CMakeLists.txt:
    python _build_ffi.py OUT.c [core/include/parataxis.h]
CMake then compiles OUT.c and _pxpy.c (the binding's own C) into one Python
module under the project's warnings and links it to libparataxis.so.  The cdef
is generated from parataxis.h (the whole C API, never restated by hand) and
the declarations of _pxpy.h (the calls on the queues' gates, made without the
GIL).  Nothing here calls into Python: what needs the GIL is parataxis._host.
"""
import os
import re
import sys

import cffi

# The C API's declarations, generated from the header (the reference): its
# text without comments, PX_API and the C++ guard, each integer #define as a
# constant whose value the compiler gives ("..."); other preprocessor lines
# (the include guard, function-like macros) are left out.  An array whose
# length is such a constant (px_fiber_info.object_name) gets its length from
# the compiler too ("[...]"), as cffi's parser takes only numbers there.
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
            line = re.sub(r"\bPX_API\s+", "", line)
            out.append(re.sub(r"\[\s*PX_\w+\s*\]", "[...]", line))
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


# _pxpy.c is compiled next to what cffi generates (bindings/python/CMakeLists.txt),
# under the project's warnings: the module's init function is declared first for
# -Wmissing-prototypes (cffi defines it without a prototype).
SOURCE = '#include "_pxpy.h"\nPyMODINIT_FUNC PyInit__parataxis(void);\n'


def make_ffi(api_header: str = API_HEADER) -> cffi.FFI:
    ffi = cffi.FFI()
    # socklen_t (of the header's I/O calls) comes from <sys/socket.h>, which
    # cffi's parser does not read: an integer type of the compiler's size.
    ffi.cdef("typedef int... socklen_t;\n" + header_cdef(api_header) + pxpy_cdef())
    ffi.set_source("parataxis._parataxis", SOURCE)
    return ffi


if __name__ == "__main__":
    make_ffi(*sys.argv[2:3]).emit_c_code(sys.argv[1])
