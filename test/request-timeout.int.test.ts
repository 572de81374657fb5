// AMBIENT_REQUEST_TIMEOUT_MS: a request whose headers or body arrive too slowly gets 408 and its socket is
// closed; an idle keep-alive connection and a response the client reads slowly are not cut by it. The
// transport does not depend on the database, but the attack is run on both, as every attack is.
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, testDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

const TIMEOUT_MS = 500;

/** A raw connection that collects what the server sends and notes when the server closes it. */
function rawConnection(url: string): { socket: Socket; received: () => string; closed: Promise<void> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return { socket, received: () => received, closed };
}

/** Writes one byte every `everyMs` until the socket closes. */
function trickle(socket: Socket, bytes: string, everyMs: number): () => void {
  let i = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || i >= bytes.length) return clearInterval(timer);
    socket.write(bytes[i++]);
  }, everyMs);
  return () => clearInterval(timer);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(BACKENDS)('request timeout (AMBIENT_REQUEST_TIMEOUT_MS) on %s', (backend) => {
  let database: TestDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    database = await testDatabase(backend);
    server = await startServerProcess({ DATABASE_URL: database.url, AMBIENT_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) });
  }, 60_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await database?.dispose();
  });

  it('answers 408 to a body sent slower than the timeout, and closes the socket', async () => {
    const { socket, received, closed } = rawConnection(server.url);
    const body = new URLSearchParams({ username: 'slow', password: 'x'.repeat(80) }).toString();
    socket.write(
      'POST /v1/ambient/api/auth/token HTTP/1.1\r\nHost: localhost\r\n' +
        `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    // Every byte well inside the timeout, the whole body far beyond it.
    const stop = trickle(socket, body, 100);
    await closed;
    stop();
    expect(received()).toMatch(/^HTTP\/1\.1 408 /);
  }, 20_000);

  it('answers 408 to headers sent slower than the timeout, and closes the socket', async () => {
    const { socket, received, closed } = rawConnection(server.url);
    socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n');
    const stop = trickle(socket, `X-Slow: ${'a'.repeat(100)}\r\n\r\n`, 100);
    await closed;
    stop();
    expect(received()).toMatch(/^HTTP\/1\.1 408 /);
    const body = JSON.parse(received().slice(received().indexOf('\r\n\r\n') + 4));
    expect(body).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'timeout' }] });
  }, 20_000);

  it('answers 431 with an OperationOutcome to a request line and headers beyond 16 KiB, and closes the socket', async () => {
    const { socket, received, closed } = rawConnection(server.url);
    socket.write(`GET /fhir/Patient?name=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    await closed;
    expect(received()).toMatch(/^HTTP\/1\.1 431 /);
    expect(received()).toMatch(/Content-Type: application\/fhir\+json/);
    const body = JSON.parse(received().slice(received().indexOf('\r\n\r\n') + 4));
    expect(body).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'too-long' }] });
    expect(body.issue[0].diagnostics).toMatch(/POST _search/);
  }, 20_000);

  it('keeps an idle keep-alive connection past the timeout, and lets a slow reader have the whole response', async () => {
    const { socket, received, closed } = rawConnection(server.url);
    socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await sleep(TIMEOUT_MS * 3);
    expect(received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(socket.destroyed).toBe(false);

    // The CapabilityStatement is large; stop reading for longer than the timeout, then read it all.
    const before = received().length;
    socket.write('GET /fhir/metadata HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    socket.pause();
    await sleep(TIMEOUT_MS * 3);
    socket.resume();
    await closed;
    const response = received().slice(before);
    expect(response).toMatch(/^HTTP\/1\.1 200 /);
    const [head, payload] = response.split('\r\n\r\n');
    const length = /content-length: (\d+)/i.exec(head);
    if (length) expect(Buffer.byteLength(payload, 'latin1')).toBe(Number(length[1]));
    else expect(payload.trimEnd().endsWith('0')).toBe(true); // chunked: the last chunk arrived
  }, 20_000);
});
