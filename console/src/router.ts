// Client-side routes under /console (History API): the server answers index.html for each of them
// (src/http/console.ts), so a reload or a shared link opens the same screen.
import { useEffect, useState } from 'preact/hooks';
import { basePath } from './api';

export interface Route {
  /** The path below /console, without a trailing slash: '', '/resources', '/resources/Patient/1'. */
  readonly path: string;
  readonly query: URLSearchParams;
}

const CHANGE = 'console:navigate';

export const consoleHref = (path: string): string => `${basePath()}/console${path}`;

function current(): Route {
  const prefix = `${basePath()}/console`;
  const path = location.pathname.startsWith(prefix) ? location.pathname.slice(prefix.length) : '';
  return { path: path.replace(/\/+$/, ''), query: new URLSearchParams(location.search) };
}

export function navigate(path: string, options: { replace?: boolean } = {}): void {
  const href = consoleHref(path);
  if (options.replace) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  window.dispatchEvent(new Event(CHANGE));
  window.scrollTo(0, 0);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const update = () => setRoute(current());
    window.addEventListener('popstate', update);
    window.addEventListener(CHANGE, update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener(CHANGE, update);
    };
  }, []);
  return route;
}

/** A click on a console link moves within the page (a modified click opens a tab as usual). */
export function followLink(event: MouseEvent, path: string): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(path);
}

/** The console path of a resource page. */
export const resourcePath = (type: string, id: string): string =>
  `/resources/${encodeURIComponent(type)}/${encodeURIComponent(id)}`;
