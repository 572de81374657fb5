// A request target's two halves. The path is what logs and audit lines name: a query string may carry
// credentials or patient data (docs/security.md), so it is cut off in one place.

/** The URL without its query string. */
export function pathOf(url: string): string {
  const at = url.indexOf('?');
  return at < 0 ? url : url.slice(0, at);
}

/** The query string of a URL or request target, without its `?` ('' when there is none). */
export function queryOf(url: string): string {
  const at = url.indexOf('?');
  return at < 0 ? '' : url.slice(at + 1);
}
