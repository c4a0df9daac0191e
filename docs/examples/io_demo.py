"""io_demo.py -- Python fibers doing I/O: an echo server and its clients.

Run:  make demo   (or: pip install . && python docs/examples/io_demo.py)

A fiber per connection on a parataxis socket (a socket.socket whose blocking
calls park only the fiber), three client fibers on streams, a recv that a
timeout scope ends, and a blocking call on the C pool while the fibers run.
"""
import os

import parataxis as px


def echo(conn: px.socket) -> None:
    with conn:
        while data := conn.recv(1024):
            conn.sendall(data)


def server(listener: px.socket) -> None:
    while True:
        conn, _ = listener.accept()
        px.spawn(echo, conn)


def client(port: int, i: int) -> None:
    with px.open_tcp_stream("localhost", port) as s:    # the name: looked up on the pool
        s.send_all(b"hello from client %d" % i)
        print(f'client {i} got back "{s.receive_some().decode()}"')


def main() -> None:
    listener = px.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    print(f"echo server on 127.0.0.1, port {port}")
    srv = px.spawn(server, listener)
    for f in [px.spawn(client, port, i) for i in range(3)]:
        f.join()

    with px.create_connection(("127.0.0.1", port)) as quiet:
        with px.move_on_after(0.02) as scope:
            quiet.recv(10)
        print(f"recv on a quiet socket for 20 ms: ended by its scope: {scope.expired}")

    r, w = os.pipe()

    def writer() -> None:
        px.sleep(0.01)
        os.write(w, b"written by a fiber")
    px.spawn(writer)
    print("os.read on the blocking pool got", px.run_blocking(os.read, r, 64))
    os.close(r)
    os.close(w)

    listener.close()                 # wakes the accept with ClosedResourceError
    try:
        srv.join()
    except px.ClosedResourceError:
        print("server stopped: its listener was closed")


px.run(main)
