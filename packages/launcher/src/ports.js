// Port helpers shared by the fleet launcher and the brokers it starts.
const fs = require('node:fs');
const net = require('node:net');

/**
 * The first port of the kernel's ephemeral range (outgoing connections take their local ports
 * from it). Ports for listeners are picked below it: a port the kernel hands out for listening
 * (`listen(0)`) lies inside that range, so between picking it and a child process binding it, any
 * outgoing connection on the machine can take it (EADDRINUSE at start-up).
 */
function ephemeralStart() {
  try {
    const [low] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && low > 2048) return low;
  } catch {
    // Not Linux: fall back to the IANA dynamic range's start.
  }
  return 49152;
}

const LOWEST = 10000;
const handedOut = new Set();

/** Whether a listener can bind the port on every interface right now. */
function bindable(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, () => server.close(() => resolve(true)));
  });
}

/**
 * A TCP port that was free a moment ago, below the ephemeral range so that no outgoing connection
 * takes it before its listener binds it; never the same one twice in a process.
 */
async function freePort() {
  const high = ephemeralStart();
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const port = LOWEST + Math.floor(Math.random() * (high - LOWEST));
    if (handedOut.has(port)) continue;
    if (await bindable(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port found between ${LOWEST} and ${high}`);
}

/** Whether something accepts connections on 127.0.0.1:<port>. */
function accepting(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

module.exports = { freePort, accepting };
