// SIGTERM drains the server, but never for longer than AMBIENT_SHUTDOWN_TIMEOUT_MS: a client that sends
// its body a byte at a time would otherwise hold the process for Node's five-minute request timeout.
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteTestDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

describe('shutting down', () => {
  let server: ServerProcess | undefined;
  let database: TestDatabase | undefined;

  afterEach(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await database?.dispose();
  });

  it('exits 0 at once when nothing is in flight', async () => {
    database = sqliteTestDatabase();
    server = await startServerProcess({ DATABASE_URL: database.url });
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(server.output()).not.toContain('shutdown did not finish');
  }, 60_000);

  it('answers a request in flight, then ends its keep-alive connection and exits 0', async () => {
    database = sqliteTestDatabase();
    server = await startServerProcess({ DATABASE_URL: database.url });
    const { hostname, port } = new URL(server.url);
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    const body = 'username=nobody&password=wrong';
    socket.write(
      'POST /v1/ambient/api/auth/token HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n' +
        `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\nusername=`,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.write(body.slice('username='.length));
    expect(await server.exited).toBe(0);
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 (400|401) /);
    expect(answer).toContain('invalid_grant');
  }, 60_000);

  it('exits 1 after the timeout, saying so, while a request body never ends', async () => {
    database = sqliteTestDatabase();
    server = await startServerProcess({ DATABASE_URL: database.url, AMBIENT_SHUTDOWN_TIMEOUT_MS: '1500' });
    const { hostname, port } = new URL(server.url);
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      'POST /v1/ambient/api/auth/token HTTP/1.1\r\nHost: x\r\n' +
        'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nusername=',
    );
    // The request is in flight once the server has its headers; then the drain begins.
    await new Promise((resolve) => setTimeout(resolve, 300));
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(1);
    socket.destroy();
    const lines = server.output().split('\n');
    expect(lines.some((l) => l.includes('"msg":"shutting down"'))).toBe(true);
    expect(lines.find((l) => l.includes('shutdown did not finish in time'))).toContain('"timeout_ms":1500');
  }, 60_000);
});
