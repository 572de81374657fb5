// The probe that decides whether the Redis suites run (test/global-setup.ts): it must say yes only to
// something that answers PING as Redis does, and no, quickly, to a closed port or another protocol.
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { redisAnswers } from './support/redis-probe.js';

const servers: Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

/** A TCP server on a free port that answers every connection's first data with `reply`. */
async function fakeServer(reply: string | undefined): Promise<string> {
  const server = createServer((socket) => {
    socket.on('data', () => {
      if (reply !== undefined) socket.end(reply);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `redis://127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe('redisAnswers', () => {
  it('says yes to +PONG', async () => {
    expect(await redisAnswers(await fakeServer('+PONG\r\n'))).toBe(true);
  });

  it('says yes to a Redis that wants a password (the URL may carry it)', async () => {
    expect(await redisAnswers(await fakeServer('-NOAUTH Authentication required.\r\n'))).toBe(true);
  });

  it('says no to a closed port', async () => {
    const url = await fakeServer('+PONG\r\n');
    servers.pop()!.close();
    expect(await redisAnswers(url)).toBe(false);
  });

  it('says no to a server of another protocol', async () => {
    expect(await redisAnswers(await fakeServer('HTTP/1.1 400 Bad Request\r\n\r\n'))).toBe(false);
  });

  it('says no, in time, to a server that never answers', async () => {
    const started = Date.now();
    expect(await redisAnswers(await fakeServer(undefined), 300)).toBe(false);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
