import type { Socket } from 'node:net';

/**
 * Has node's HTTP server close this connection gently once its `Connection: close` answer is
 * out, for an answer given while the request's body may still be arriving (an upload refused
 * partway, or before it began). Node ends such a connection with `socket.destroySoon()`, which
 * closes it as soon as the answer is written; closing with input still unread makes the kernel
 * reset the connection, and a client still writing its body then sees a write fail and may drop
 * the answer it had not read yet (RFC 9112 §9.6 asks for a lingering close).
 *
 * Here the write side closes (the answer, then FIN) and the socket stays open for `graceMs`,
 * long enough for the client to read the answer and stop: with `drain`, what it still sends is
 * read and dropped; without, nothing more is read (its writes fill the socket buffers and wait,
 * so a large body is not taken in). Then the connection closes.
 */
export function closeGently(socket: Socket, options: { graceMs: number; drain: boolean }): void {
  socket.destroySoon = () => {
    if (socket.writable) socket.end();
    if (options.drain) {
      socket.on('data', () => undefined);
      socket.resume();
    } else {
      socket.pause();
    }
    const timer = setTimeout(() => socket.destroy(), options.graceMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
}
