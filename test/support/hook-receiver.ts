// A rest-hook endpoint the tests run: records every request it gets (method, path, headers, body) and
// answers with the status the test sets (200 by default), or not at all ('hang').
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedHook {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly at: number;
}

export interface HookReceiver {
  /** `http://127.0.0.1:<port>` */
  readonly base: string;
  readonly received: ReceivedHook[];
  /** What the next requests are answered: a status, or 'hang' (no answer until the receiver closes). */
  answer: number | 'hang';
  /** Resolves once `count` requests (in all) have arrived, or rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedHook[]>;
  close(): Promise<void>;
}

export async function startHookReceiver(): Promise<HookReceiver> {
  const received: ReceivedHook[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const hanging = new Set<import('node:http').ServerResponse>();
  const receiver: HookReceiver = {
    base: '',
    received,
    answer: 200,
    waitFor(count, timeoutMs = 10_000) {
      if (received.length >= count) return Promise.resolve(received.slice());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`expected ${count} hooks within ${timeoutMs} ms, got ${received.length}`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(received.slice());
          },
        });
      });
    },
    async close() {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString(),
        at: Date.now(),
      });
      for (const waiter of waiters.splice(0)) {
        if (received.length >= waiter.count) waiter.resolve();
        else waiters.push(waiter);
      }
      if (receiver.answer === 'hang') {
        hanging.add(response);
        return;
      }
      response.statusCode = receiver.answer;
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  (receiver as { base: string }).base = `http://127.0.0.1:${port}`;
  return receiver;
}
