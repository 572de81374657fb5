// What the Synthea and the synthetic search mixes share: a GET as a client does it, and one search
// timed over many requests from concurrent clients.
import { performance } from 'node:perf_hooks';

/** GET with the bearer token; throws on any non-2xx, so that a failing search never counts as fast. */
export async function getJson(url, token) {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  const text = await res.text();
  if (!res.ok) throw new Error(`GET ${url} -> ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

/**
 * Runs `query` (relative to `<baseUrl>/fhir`) `n` times with `concurrency` clients, or until
 * `maxSeconds` have passed; `pages` > 1 follows the next link as a client walking the result would.
 */
export async function timeSearch(baseUrl, token, query, { n, concurrency, pages = 1, maxSeconds = Infinity }) {
  const latencies = [];
  let next = 0;
  const started = performance.now();
  const deadline = started + maxSeconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n && performance.now() < deadline) {
        next++;
        const t0 = performance.now();
        let bundle = await getJson(`${baseUrl}/fhir/${query}`, token);
        for (let page = 1; page < pages; page++) {
          const link = bundle.link?.find((l) => l.relation === 'next');
          if (!link) break;
          bundle = await getJson(link.url.replace(/^https?:\/\/[^/]+/, baseUrl), token);
        }
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    perSec: +(latencies.length / seconds).toFixed(1),
    p50: +percentile(latencies, 0.5).toFixed(2),
    p99: +percentile(latencies, 0.99).toFixed(2),
  };
}
