// The console's frame: the sign-in form until there is a session, then the header (navigation, who is
// signed in, Sign out) around the screen the route names.
import { useEffect, useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { ApiError, currentSession, endSession, onSessionChange, signIn } from './api';
import type { Session } from './api';
import { ResourcePage } from './resource';
import { ResourcesScreen } from './resources';
import { ExportsScreen } from './exports';
import { ScribeRecordPage, ScribeScreen } from './scribe';
import { consoleHref, followLink, navigate, useRoute } from './router';
import type { Route } from './router';

export function App(): JSX.Element {
  const [session, setSession] = useState<Session | undefined>(currentSession);
  const [notice, setNotice] = useState<string | undefined>();
  useEffect(() => {
    onSessionChange((next, reason) => {
      setSession(next);
      setNotice(reason);
    });
  }, []);
  if (!session) return <SignIn notice={notice} />;
  return <Shell session={session} />;
}

function SignIn({ notice }: { notice?: string }): JSX.Element {
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    setBusy(true);
    setError(undefined);
    try {
      await signIn(String(form.get('username') ?? ''), String(form.get('password') ?? ''));
    } catch (e) {
      setError(e instanceof ApiError ? e.message : `The server could not be reached: ${String(e)}`);
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form class="card" onSubmit={submit} aria-labelledby="signin-title">
        <p class="brand">ambient-fhir</p>
        <h1 id="signin-title">Sign in to the console</h1>
        {notice && (
          <p class="notice" role="status">
            {notice}
          </p>
        )}
        <label for="username">Username</label>
        <input id="username" name="username" autocomplete="username" required autofocus />
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required />
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
        <p class="hint">A service account of this server. The token stays in this page only: a reload signs out.</p>
      </form>
    </main>
  );
}

const SECTIONS = [
  { path: '/resources', label: 'Resources' },
  { path: '/scribe', label: 'Scribe' },
  { path: '/exports', label: 'Exports' },
];

function Shell({ session }: { session: Session }): JSX.Element {
  const route = useRoute();
  useEffect(() => {
    if (route.path === '') navigate('/resources', { replace: true });
  }, [route.path]);
  return (
    <>
      <header class="top">
        <span class="brand">ambient-fhir</span>
        <nav aria-label="Console">
          {SECTIONS.map((s) => (
            <a
              href={consoleHref(s.path)}
              onClick={(e) => followLink(e, s.path)}
              aria-current={route.path.startsWith(s.path) ? 'page' : undefined}
            >
              {s.label}
            </a>
          ))}
        </nav>
        <span class="who">{session.username}</span>
        <button type="button" onClick={() => endSession('You signed out.')}>
          Sign out
        </button>
      </header>
      <main class="content">{screen(route, session)}</main>
    </>
  );
}

function screen(route: Route, session: Session): JSX.Element | null {
  const parts = route.path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'resources' && parts.length === 1) return <ResourcesScreen route={route} session={session} />;
  if (parts[0] === 'resources' && parts.length === 3) {
    return <ResourcePage key={`${parts[1]}/${parts[2]}`} type={parts[1]} id={parts[2]} session={session} />;
  }
  if (parts[0] === 'scribe' && parts.length === 1) return <ScribeScreen session={session} />;
  if (parts[0] === 'scribe' && parts.length === 2) return <ScribeRecordPage key={parts[1]} id={parts[1]} />;
  if (parts[0] === 'exports' && parts.length === 1) return <ExportsScreen session={session} />;
  if (parts.length === 0) return null;
  return (
    <section>
      <h1>Not found</h1>
      <p>The console has no page at this address.</p>
    </section>
  );
}
