// A local stand-in for an OpenAI-compatible server (chat completions, audio transcriptions), for tests:
// it records every request and answers what the test's handler says, including never (to test timeouts
// and shutdowns mid-request).
import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The body parsed as JSON, when it is JSON. */
  readonly json: unknown;
}

export interface FakeAnswer {
  readonly status?: number;
  readonly json?: unknown;
  readonly body?: string;
  readonly headers?: Record<string, string>;
  /** Answer after this many milliseconds. */
  readonly delayMs?: number;
  /** Never answer (until the server closes). */
  readonly hang?: boolean;
}

export type FakeHandler = (request: FakeRequest, index: number) => FakeAnswer | Promise<FakeAnswer>;

export interface FakeEngineServer {
  /** Base URL, e.g. http://127.0.0.1:41234/v1 */
  readonly url: string;
  readonly requests: FakeRequest[];
  /** Replaces the handler. */
  handle(handler: FakeHandler): void;
  /** Resolves once `count` requests have arrived. */
  received(count: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeEngine(handler: FakeHandler): Promise<FakeEngineServer> {
  const requests: FakeRequest[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  let current = handler;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        json = undefined;
      }
      const request: FakeRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, json };
      const index = requests.push(request) - 1;
      for (const waiter of waiters.filter((w) => requests.length >= w.count)) waiter.resolve();
      void Promise.resolve(current(request, index)).then(async (answer) => {
        if (answer.hang) return;
        if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
        if (res.destroyed) return;
        const text = answer.json !== undefined ? JSON.stringify(answer.json) : (answer.body ?? '');
        res.writeHead(answer.status ?? 200, {
          'content-type': answer.json !== undefined ? 'application/json' : 'text/plain',
          ...answer.headers,
        });
        res.end(text);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    handle(next) {
      current = next;
    },
    received(count) {
      if (requests.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A chat-completions answer whose message is `content`. */
export function chatAnswer(content: string): FakeAnswer {
  return {
    json: {
      id: 'chatcmpl-test',
      object: 'chat.completion',
      model: 'test-model',
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    },
  };
}

/** A JSON note answer with these sections. */
export function noteAnswer(sections: Record<string, string>): FakeAnswer {
  return chatAnswer(JSON.stringify({ sections: Object.entries(sections).map(([title, text]) => ({ title, text })) }));
}
