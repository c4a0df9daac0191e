/*
** pxlua_io.c -- fibers that wait on file descriptors, and the blocking
** built-ins the pool runs for them: what bindings/lua/parataxis/io.lua and
** socket.lua build the I/O API on.
**
** Every wait is a pxlua_wait_op (pxlua_fiber.h): px_wait_fd, px_getaddrinfo
** and px_run_blocking answer PX_EYIELD in a hosted fiber, the coroutine
** yields to the scheduler, and the continuation makes the same call again to
** collect the outcome.  A Lua state is single-threaded, so nothing here runs
** Lua on a pool thread: a lookup or a file's bytes are plain C, and only the
** fiber, once resumed, turns them into Lua values.
**
** Errors follow the module's rule: a scope that ends a wait, and misuse, raise
** the error object; an outcome the caller handles is returned -- ECLOSED for
** the px.wait_* calls, "closed" / "timeout" for the sockets, io.open's
** `nil, message, errno` for the files, `nil, err` for a lookup that failed.
*/
#define _GNU_SOURCE     /* dladdr, RTLD_NODELETE; with getaddrinfo, poll, clock values */

#include <lauxlib.h>
#include <lua.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "parataxis.h"
#include "pxhost.h"
#include "pxlua_fiber.h"
#include "pxlua_io.h"

/* -- Descriptors ------------------------------------------------------------ */

/* A table, or a userdata with an __index: one that may have a getfd. */
static int indexable(lua_State *L, int arg)
{
    int t = lua_type(L, arg);
    if (t == LUA_TTABLE)
        return 1;
    if (t != LUA_TUSERDATA || luaL_getmetafield(L, arg, "__index") == LUA_TNIL)
        return 0;
    lua_pop(L, 1);
    return 1;
}

/* The fd at `arg`: an integer, or what its getfd() method answers (LuaSocket's
** sockets and this module's).  A closed socket (getfd() -1), a negative or
** too large number, anything else: EINVAL. */
static int check_fd(lua_State *L, int arg, const char *where)
{
    return pxlua_check_fd(L, arg, where);
}

int pxlua_check_fd(lua_State *L, int arg, const char *where)
{
    lua_Integer fd = -1;
    int isnum = 0;
    if (lua_type(L, arg) == LUA_TNUMBER) {
        fd = lua_tointegerx(L, arg, &isnum);
    } else if (indexable(L, arg)) {
        if (lua_getfield(L, arg, "getfd") != LUA_TNIL) {
            lua_pushvalue(L, arg);
            lua_call(L, 1, 1);
            fd = lua_tointegerx(L, -1, &isnum);
        }
        lua_pop(L, 1);
    }
    if (!isnum || fd < 0 || fd > INT_MAX)
        pxlua_arg_error(L, where, arg, "fd",
                        "an open fd (an integer >= 0) or an object with getfd()");
    return (int)fd;
}

/*
** px.wait_readable(x), px.wait_writable(x): the fd goes to index 2, so that
** the call and its continuation read it alike.  true once ready; nil, err
** (ECLOSED) when px.notify_closing ran meanwhile; every other outcome raises.
*/
static int wait_read_call(lua_State *L)
{
    return px_wait_fd((int)lua_tointeger(L, 2), PX_READABLE);
}

static int wait_write_call(lua_State *L)
{
    return px_wait_fd((int)lua_tointeger(L, 2), PX_WRITABLE);
}

static int wait_done(lua_State *L, int rc, const char *name)
{
    if (rc == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    if (rc != PX_ECLOSED)
        return pxlua_raise(L, rc, name);
    lua_pushnil(L);
    pxlua_push_error(L, rc, name);
    return 2;
}

static const pxlua_wait_op WAIT_READABLE = {
    "px.wait_readable", wait_read_call, wait_read_call, wait_done };
static const pxlua_wait_op WAIT_WRITABLE = {
    "px.wait_writable", wait_write_call, wait_write_call, wait_done };

static int l_wait_readable(lua_State *L)
{
    int fd = check_fd(L, 1, WAIT_READABLE.name);
    lua_settop(L, 1);
    lua_pushinteger(L, fd);
    return pxlua_wait(L, &WAIT_READABLE);
}

static int l_wait_writable(lua_State *L)
{
    int fd = check_fd(L, 1, WAIT_WRITABLE.name);
    lua_settop(L, 1);
    lua_pushinteger(L, fd);
    return pxlua_wait(L, &WAIT_WRITABLE);
}

/* px.notify_closing(x): wakes every waiter of the fd with ECLOSED; true. */
static int l_notify_closing(lua_State *L)
{
    (void)px_fd_notify_closing(check_fd(L, 1, "px.notify_closing"));
    lua_pushboolean(L, 1);
    return 1;
}

/*
** The sockets' wait, io.sock_wait(fd, events, deadline): parks until fd is
** ready for events (1 read, 2 write) or the deadline passes (nil: never; else
** px.now() seconds).  Returns nothing once ready, "timeout" when the deadline
** passed, "closed" when the fd is being closed (notify_closing); raises as the
** waits above.  Off-fiber it blocks the thread in poll(2), as a LuaSocket
** socket with a timeout does, and returns early (ready) on a signal, so that
** the caller's retry runs Lua code again (Ctrl-C's hook).
*/
#define SW_FD 1
#define SW_EVENTS 2
#define SW_DEADLINE 3

static int64_t sock_deadline(lua_State *L)
{
    if (lua_isnoneornil(L, SW_DEADLINE))
        return -1;
    double s = lua_tonumber(L, SW_DEADLINE);
    int64_t ns;
    if (pxhost_ns(s, &ns) != 0)
        ns = 0;                       /* before the clock's start: passed */
    return ns;
}

/* Index 4 says whether call() pushed a scope, for done() to pop it. */
#define SW_PUSHED 4

static int sock_wait_call(lua_State *L)
{
    int64_t deadline = sock_deadline(L);
    if (deadline >= 0) {
        int rc = px_scope_push_deadline(deadline);
        if (rc != 0)
            return rc;
        lua_pushboolean(L, 1);
    }
    return px_wait_fd((int)lua_tointeger(L, SW_FD), (unsigned)lua_tointeger(L, SW_EVENTS));
}

static int sock_wait_again(lua_State *L)
{
    return px_wait_fd((int)lua_tointeger(L, SW_FD), (unsigned)lua_tointeger(L, SW_EVENTS));
}

static int sock_wait_done(lua_State *L, int rc, const char *name)
{
    if (lua_toboolean(L, SW_PUSHED) && px_scope_pop() != 0 && rc == PX_ETIMEDOUT) {
        lua_pushliteral(L, "timeout");         /* ours: the innermost that fired */
        return 1;
    }
    if (rc == 0)
        return 0;
    if (rc == PX_ECLOSED) {
        lua_pushliteral(L, "closed");
        return 1;
    }
    return pxlua_raise(L, rc, name);
}

static const pxlua_wait_op SOCK_WAIT = {
    "px.socket", sock_wait_call, sock_wait_again, sock_wait_done };

static int poll_off_fiber(lua_State *L, int fd, unsigned events, int64_t deadline)
{
    struct pollfd p = { fd, 0, 0 };
    if (events & PX_READABLE)
        p.events |= POLLIN;
    if (events & PX_WRITABLE)
        p.events |= POLLOUT;
    int ms = -1;
    if (deadline >= 0) {
        int64_t left = deadline - px_now();
        if (left <= 0) {
            lua_pushliteral(L, "timeout");
            return 1;
        }
        int64_t m = (left + 999999) / 1000000;
        ms = m > INT_MAX ? INT_MAX : (int)m;
    }
    int n = poll(&p, 1, ms);
    if (n == 0) {
        lua_pushliteral(L, "timeout");
        return 1;
    }
    return 0;        /* ready, a signal, or POLLNVAL/POLLERR: the retry says */
}

static int l_sock_wait(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, SW_FD);
    unsigned events = (unsigned)luaL_checkinteger(L, SW_EVENTS);
    lua_settop(L, SW_DEADLINE);
    if (px_self() == 0)
        return poll_off_fiber(L, fd, events, sock_deadline(L));
    return pxlua_wait(L, &SOCK_WAIT);
}

/* -- DNS ------------------------------------------------------------------------ */

/*
** px.getaddrinfo(host [, port]): the addresses of host, as LuaSocket's
** socket.dns.getaddrinfo gives them: a list of {family = "inet" | "inet6",
** addr = "..."} (and port, when one was given), in getaddrinfo's order; or
** nil, err with err.code the EAI_* name.  A numeric host is parsed here; a
** name is looked up on the pool (px_getaddrinfo), off-fiber on the thread.
*/
static _Thread_local struct {
    int eai;
    struct addrinfo *res;
} gai_out;          /* from the call to its done: no yield comes between */

static const char *gai_name(int eai)
{
    switch (eai) {
    case EAI_AGAIN: return "EAI_AGAIN";
    case EAI_BADFLAGS: return "EAI_BADFLAGS";
    case EAI_FAIL: return "EAI_FAIL";
    case EAI_FAMILY: return "EAI_FAMILY";
    case EAI_MEMORY: return "EAI_MEMORY";
    case EAI_NONAME: return "EAI_NONAME";
    case EAI_SERVICE: return "EAI_SERVICE";
    case EAI_SOCKTYPE: return "EAI_SOCKTYPE";
    case EAI_SYSTEM: return "EAI_SYSTEM";
    default: return "EAI_FAIL";
    }
}

static void gai_hints(struct addrinfo *h, int flags)
{
    memset(h, 0, sizeof *h);
    h->ai_family = AF_UNSPEC;
    h->ai_socktype = SOCK_STREAM;       /* one entry per address, not per type */
    h->ai_flags = flags;
}

/* Keeps getaddrinfo's outcome for gai_done: 0, or a px code to raise. */
static int gai_outcome(int eai, struct addrinfo *res)
{
    if (eai == EAI_SYSTEM && errno == EAGAIN)
        return PX_EYIELD;
    if (eai == EAI_SYSTEM && errno == ETIMEDOUT)
        return PX_ETIMEDOUT;
    if (eai == EAI_SYSTEM && errno == ECANCELED)
        return PX_ECANCELED;
    gai_out.eai = eai;
    gai_out.res = res;
    return 0;
}

static int gai_call(lua_State *L)
{
    struct addrinfo hints, *res = NULL;
    gai_hints(&hints, 0);
    const char *service = lua_isnil(L, 2) ? NULL : lua_tostring(L, 2);
    int eai = px_getaddrinfo(lua_tostring(L, 1), service, &hints, &res);
    return gai_outcome(eai, res);
}

static int gai_again(lua_State *L)
{
    struct addrinfo *res = NULL;
    (void)L;           /* the recorded lookup's arguments are used */
    int eai = px_getaddrinfo("", NULL, NULL, &res);
    return gai_outcome(eai, res);
}

/* push_addrs(res, with_port): the list; called protected, so that running
** out of memory cannot leak res. */
static int push_addrs(lua_State *L)
{
    const struct addrinfo *res = lua_touserdata(L, 1);
    int with_port = lua_toboolean(L, 2);
    lua_newtable(L);
    lua_Integer n = 0;
    for (const struct addrinfo *a = res; a != NULL; a = a->ai_next) {
        char text[INET6_ADDRSTRLEN];
        const void *addr;
        int port;
        if (a->ai_family == AF_INET) {
            const struct sockaddr_in *in = (const void *)a->ai_addr;
            addr = &in->sin_addr;
            port = ntohs(in->sin_port);
        } else if (a->ai_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const void *)a->ai_addr;
            addr = &in6->sin6_addr;
            port = ntohs(in6->sin6_port);
        } else {
            continue;
        }
        if (inet_ntop(a->ai_family, addr, text, sizeof text) == NULL)
            continue;
        lua_createtable(L, 0, 3);
        lua_pushstring(L, a->ai_family == AF_INET ? "inet" : "inet6");
        lua_setfield(L, -2, "family");
        lua_pushstring(L, text);
        lua_setfield(L, -2, "addr");
        if (with_port) {
            lua_pushinteger(L, port);
            lua_setfield(L, -2, "port");
        }
        lua_rawseti(L, -2, ++n);
    }
    return 1;
}

static int gai_done(lua_State *L, int rc, const char *name)
{
    if (rc != 0)
        return pxlua_raise(L, rc, name);
    int eai = gai_out.eai;
    struct addrinfo *res = gai_out.res;
    gai_out.res = NULL;
    if (eai != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", name, gai_strerror(eai));
        pxlua_push_error(L, PX_EINVAL, name);       /* for its metatable: */
        lua_pushstring(L, gai_name(eai));
        lua_setfield(L, -2, "code");
        lua_rotate(L, -2, 1);
        lua_setfield(L, -2, "message");
        return 2;
    }
    int with_port = !lua_isnil(L, 2);
    lua_pushcfunction(L, push_addrs);
    lua_pushlightuserdata(L, res);
    lua_pushboolean(L, with_port);
    int st = lua_pcall(L, 2, 1, 0);
    freeaddrinfo(res);
    if (st != LUA_OK)
        return lua_error(L);
    return 1;
}

static const pxlua_wait_op GETADDRINFO = { "px.getaddrinfo", gai_call, gai_again, gai_done };

static int l_getaddrinfo(lua_State *L)
{
    const char *where = GETADDRINFO.name;
    size_t n;
    if (lua_type(L, 1) != LUA_TSTRING)
        return pxlua_arg_error(L, where, 1, "host", "a string");
    if (strlen(lua_tolstring(L, 1, &n)) != n)   /* C would look up only its head */
        return pxlua_arg_error(L, where, 1, "host", "a string without \"\\0\"");
    if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING &&
        !lua_isinteger(L, 2))
        return pxlua_arg_error(L, where, 2, "port", "an integer, a string or nil");
    /* getaddrinfo takes any number as a service and keeps its low 16 bits. */
    int isnum = 0;
    lua_Integer port = lua_isnoneornil(L, 2) ? 0 : lua_tointegerx(L, 2, &isnum);
    if (isnum && (port < 0 || port > 65535))
        return pxlua_arg_error(L, where, 2, "port", "an integer from 0 to 65535");
    lua_settop(L, 2);
    if (!lua_isnil(L, 2))
        (void)lua_tostring(L, 2);         /* in place: an integer port as its digits */
    /* A numeric host needs no lookup, nor the pool. */
    struct addrinfo hints, *res = NULL;
    gai_hints(&hints, AI_NUMERICHOST);
    int eai = getaddrinfo(lua_tostring(L, 1), lua_tostring(L, 2), &hints, &res);
    if (eai != EAI_NONAME) {
        gai_out.eai = eai;
        gai_out.res = res;
        return gai_done(L, 0, where);
    }
    return pxlua_wait(L, &GETADDRINFO);
}

/* -- Files on the pool ---------------------------------------------------------- */

/*
** px.read_file(path), px.write_file(path, data [, "a"]): a whole file read or
** written on a thread of the pool while only the fiber parks (a disk never
** says EAGAIN: epoll refuses files).  io.open's convention: the contents, or
** true; nil, "path: message", errno on failure.  The job is C only: its path
** and data are copied into it, and the bytes read stay in C until the fiber,
** resumed, makes the string.  A scope that fires before the job starts drops
** it unrun.  One that fires while it runs abandons a read (the call raises at
** once; the pool thread frees the job when the read ends: a FIFO with no
** writer never holds up its fiber) and waits for a write's end (a
** half-written file is worse than a late wake: the call returns true, and
** the scope's next wait raises).  Off-fiber it runs on the calling thread.
*/
typedef struct file_job {
    int write, append;
    int err;                 /* errno of the failure, or 0 */
    char *data;              /* write: what to write; read: what was read */
    size_t len;
    char path[];             /* then, for a write, the data */
} file_job;

static void file_job_free(file_job *j)
{
    if (j != NULL && !j->write)
        free(j->data);
    free(j);
}

static void file_release(void *arg, void *result)
{
    (void)result;
    file_job_free(arg);
}

static int read_all(file_job *j, int fd)
{
    size_t cap = 0, want = 4096;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uintmax_t)st.st_size < SIZE_MAX)
        want = (size_t)st.st_size + 1;  /* + 1: the read that sees the end */
    for (;;) {
        if (j->len == cap) {
            size_t ncap = cap == 0 ? want : cap * 2;
            char *d = ncap > cap ? realloc(j->data, ncap) : NULL;
            if (d == NULL)
                return ENOMEM;
            j->data = d;
            cap = ncap;
        }
        ssize_t n = read(fd, j->data + j->len, cap - j->len);
        if (n == 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return errno;
        if (n > 0)
            j->len += (size_t)n;
        if (px_blocking_cancelled())
            return ECANCELED;        /* its fiber gave up: nobody reads the rest */
    }
}

static int write_all(file_job *j, int fd)
{
    size_t done = 0;
    while (done < j->len) {
        ssize_t n = write(fd, j->data + done, j->len - done);
        if (n < 0 && errno != EINTR)
            return errno;
        if (n > 0)
            done += (size_t)n;
    }
    return 0;
}

static void *file_run(void *arg)
{
    file_job *j = arg;
    int flags = O_CLOEXEC | (j->write ? O_WRONLY | O_CREAT | (j->append ? O_APPEND : O_TRUNC)
                                      : O_RDONLY);
    int fd = open(j->path, flags, 0666);
    if (fd < 0) {
        j->err = errno;
        return j;
    }
    j->err = j->write ? write_all(j, fd) : read_all(j, fd);
    if (close(fd) != 0 && j->err == 0 && j->write)
        j->err = errno;              /* a write's last error may come at close */
    return j;
}

/* The job sits above the arguments: index FILE_JOB (read) or FILE_JOB + 2. */
static file_job *stacked_job(lua_State *L) { return lua_touserdata(L, lua_gettop(L)); }

/* A read is abandoned when a scope fires (it changes nothing: its thread
** frees what it read); a write is waited for. */
static int file_again(lua_State *L)
{
    file_job *j = stacked_job(L);
    return px_run_blocking(file_run, j, file_release, j->write ? 0 : PX_BLOCKING_ABANDON,
                           NULL);
}

static int file_call(lua_State *L)
{
    int write = lua_gettop(L) == 3;
    size_t plen, dlen = 0;
    const char *path = lua_tolstring(L, 1, &plen);
    const char *data = write ? lua_tolstring(L, 2, &dlen) : NULL;
    file_job *j = malloc(sizeof *j + plen + 1 + dlen);
    if (j == NULL)
        return PX_ENOMEM;
    memset(j, 0, sizeof *j);
    memcpy(j->path, path, plen + 1);
    j->write = write;
    if (write) {
        j->data = j->path + plen + 1;
        memcpy(j->data, data, dlen);
        j->len = dlen;
        j->append = lua_toboolean(L, 3);
    }
    lua_pushlightuserdata(L, j);
    int rc = file_again(L);
    if (rc == PX_ENOFIBER || rc == PX_EFORKED) {
        (void)file_run(j);           /* no pool for this caller: on the thread */
        rc = 0;
    }
    return rc;
}

static int file_done(lua_State *L, int rc, const char *name)
{
    if (rc == PX_ETIMEDOUT || rc == PX_ECANCELED)
        return pxlua_raise(L, rc, name);   /* file_release freed the job */
    file_job *j = lua_type(L, -1) == LUA_TLIGHTUSERDATA ? stacked_job(L) : NULL;
    int err = rc == PX_ENOMEM ? ENOMEM : rc != 0 ? EINVAL : j->err;
    if (err == ECANCELED) {
        /* read_all stopped early: a scope of this fiber fired while the job
        ** ran, and the job ended before the fiber saw it, so px_run_blocking
        ** delivered it; the scope stays fired, and px_sleep(0) answers its
        ** code at once (it never parks once a scope fired). */
        int code = px_sleep(0);
        if (code == PX_ETIMEDOUT || code == PX_ECANCELED) {
            file_job_free(j);
            return pxlua_raise(L, code, name);
        }
    }
    if (err != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", lua_tostring(L, 1), strerror(err));
        lua_pushinteger(L, err);
        file_job_free(j);
        return 3;
    }
    if (j->write)
        lua_pushboolean(L, 1);
    else
        lua_pushlstring(L, j->data, j->len);   /* may raise: j leaks then (no memory) */
    file_job_free(j);
    return 1;
}

static const pxlua_wait_op READ_FILE = { "px.read_file", file_call, file_again, file_done };
static const pxlua_wait_op WRITE_FILE = { "px.write_file", file_call, file_again, file_done };

static void check_path(lua_State *L, const char *where)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        pxlua_arg_error(L, where, 1, "path", "a string");
    size_t n;
    const char *p = lua_tolstring(L, 1, &n);
    if (strlen(p) != n)
        pxlua_arg_error(L, where, 1, "path", "a string without \"\\0\"");
}

static int l_read_file(lua_State *L)
{
    check_path(L, READ_FILE.name);
    lua_settop(L, 1);
    return pxlua_wait(L, &READ_FILE);
}

static int l_write_file(lua_State *L)
{
    const char *where = WRITE_FILE.name;
    check_path(L, where);
    if (lua_type(L, 2) != LUA_TSTRING)
        return pxlua_arg_error(L, where, 2, "data", "a string");
    const char *mode = luaL_optstring(L, 3, "w");
    if (strcmp(mode, "w") != 0 && strcmp(mode, "a") != 0)
        return pxlua_arg_error(L, where, 3, "mode", "\"w\" or \"a\"");
    int append = mode[0] == 'a';
    lua_settop(L, 2);
    lua_pushboolean(L, append);
    return pxlua_wait(L, &WRITE_FILE);
}

/* -- The table ---------------------------------------------------------------- */

/*
** The pool's threads run this module's code (the library is linked in) and
** outlive every job: idle, they wait for the next one.  lua_close unloads a C
** module (dlclose), and a thread that woke up in unmapped code crashed the
** process at its exit, now and then.  So the module stays mapped until the
** process ends: RTLD_NODELETE, given to a new handle on the loaded file (a
** handle that is never closed: dlclose would drop only its own reference).
*/
static const char module_anchor;      /* an address inside the module's mapping */

static void pin_module(void)
{
    Dl_info info;
    if (dladdr(&module_anchor, &info) == 0 || info.dli_fname == NULL)
        return;
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

int pxlua_io(lua_State *L)
{
    pin_module();
    static const luaL_Reg fns[] = {
        { "wait_readable", l_wait_readable }, { "wait_writable", l_wait_writable },
        { "notify_closing", l_notify_closing }, { "sock_wait", l_sock_wait },
        { "getaddrinfo", l_getaddrinfo },
        { "read_file", l_read_file }, { "write_file", l_write_file },
        { NULL, NULL }
    };
    luaL_newlib(L, fns);
    return 1;
}
