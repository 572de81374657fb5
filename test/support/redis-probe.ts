// Is a Redis answering at this URL? One PING over a plain socket, with a short time limit, so the global
// set-up can decide once whether the Redis suites run, without loading a client library.
import { connect } from 'node:net';

export function redisAnswers(url: string, timeoutMs = 1000): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname || '127.0.0.1', port: Number(port || 6379) });
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    // +PONG, or -NOAUTH when it wants a password: either way a Redis is there.
    socket.on('data', (chunk: Buffer) => done(/^[+-]/.test(chunk.toString('latin1'))));
  });
}
