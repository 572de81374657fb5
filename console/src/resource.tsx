// A resource's page: its narrative (sanitised), what it refers to and what refers to it, its JSON as
// stored, its history with two versions side by side; Edit and Delete (with a confirmation).
import { useEffect, useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { api, ApiError } from './api';
import type { Session } from './api';
import { Comparison } from './compare';
import { Editor } from './editor';
import { formatCount, localReference } from './format';
import { sanitiseNarrative } from './narrative';
import { ErrorText, ResourceLink } from './parts';
import { findReferrers, firstOfEachType } from './referrers';
import type { Referrers } from './referrers';
import { consoleHref, followLink, navigate } from './router';
import { may } from './scopes';

type Resource = Record<string, any> & { resourceType: string; id: string };
interface HistoryEntry {
  resource?: Resource;
  request?: { method?: string };
  response?: { status?: string; etag?: string; lastModified?: string };
}
interface Loaded {
  resource: Resource;
  history?: { entries: HistoryEntry[]; more: boolean };
  historyError?: string;
}

const HISTORY_COUNT = 50;
const MAX_REFERENCES = 200;

async function load(type: string, id: string): Promise<Loaded> {
  const base = `/fhir/${encodeURIComponent(type)}/${encodeURIComponent(id)}`;
  const [resource, history] = await Promise.all([
    api<Resource>(base),
    api<{ entry?: HistoryEntry[]; link?: { relation: string }[] }>(`${base}/_history?_count=${HISTORY_COUNT}`).catch(
      (e: unknown) => e,
    ),
  ]);
  if (history instanceof ApiError || history instanceof Error) {
    return { resource: resource.body, historyError: history.message };
  }
  const bundle = (history as { body: { entry?: HistoryEntry[]; link?: { relation: string }[] } }).body;
  return {
    resource: resource.body,
    history: { entries: bundle.entry ?? [], more: Boolean(bundle.link?.some((l) => l.relation === 'next')) },
  };
}

/** Every relative reference in the resource, with the element path it sits at. */
export function referencesOf(resource: unknown): { path: string; type: string; id: string }[] {
  const found: { path: string; type: string; id: string }[] = [];
  const walk = (value: unknown, path: string) => {
    if (found.length >= MAX_REFERENCES || value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) return value.forEach((v) => walk(v, path));
    for (const [key, v] of Object.entries(value)) {
      if (key === 'reference') {
        const target = localReference(v);
        if (target) found.push({ path, ...target });
      } else if (key !== 'contained' && key !== 'text') walk(v, path ? `${path}.${key}` : key);
    }
  };
  walk(resource, '');
  return found;
}

export function ResourcePage({ type, id, session }: { type: string; id: string; session: Session }): JSX.Element {
  const [loaded, setLoaded] = useState<Loaded | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [mode, setMode] = useState<'view' | 'edit' | 'delete'>('view');
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    let live = true;
    load(type, id)
      .then((l) => live && (setLoaded(l), setError(undefined)))
      .catch((e) => live && setError(e instanceof ApiError ? e.message : String(e)));
    return () => {
      live = false;
    };
  }, [type, id, generation]);
  const listPath = `/resources?type=${encodeURIComponent(type)}`;
  const crumbs = (
    <p class="crumbs">
      <a href={consoleHref(listPath)} onClick={(e) => followLink(e, listPath)}>
        {type}
      </a>{' '}
      › {id}
    </p>
  );
  if (error) {
    return (
      <section>
        {crumbs}
        <h1>
          {type}/{id}
        </h1>
        <ErrorText message={error} />
      </section>
    );
  }
  if (!loaded) return <p class="muted">Loading…</p>;
  const { resource } = loaded;
  return (
    <article>
      {crumbs}
      <div class="title-row">
        <h1>
          {type}/{id}
        </h1>
        <div class="actions">
          {may(session.scopes, type, 'u') && (
            <button type="button" onClick={() => setMode('edit')} disabled={mode !== 'view'}>
              Edit
            </button>
          )}
          {may(session.scopes, type, 'd') && (
            <button type="button" class="danger" onClick={() => setMode('delete')} disabled={mode !== 'view'}>
              Delete
            </button>
          )}
        </div>
      </div>
      <p class="meta">
        Version {resource.meta?.versionId ?? '?'} · last updated {resource.meta?.lastUpdated ?? '?'}
      </p>
      {mode === 'delete' && <ConfirmDelete type={type} id={id} onCancel={() => setMode('view')} />}
      {mode === 'edit' && (
        <Editor
          type={type}
          initial={resource}
          stored={{ id, versionId: resource.meta?.versionId }}
          scopes={session.scopes}
          onCancel={() => setMode('view')}
          onSaved={() => {
            setMode('view');
            setGeneration((g) => g + 1);
          }}
        />
      )}
      <Narrative resource={resource} />
      <References resource={resource} />
      <ReferredBy key={generation} type={type} id={id} scopes={session.scopes} />
      <section aria-labelledby="json-heading">
        <h2 id="json-heading">JSON</h2>
        <pre class="json">{JSON.stringify(resource, null, 2)}</pre>
      </section>
      <History loaded={loaded} />
    </article>
  );
}

function Narrative({ resource }: { resource: Resource }): JSX.Element {
  const div = typeof resource.text?.div === 'string' ? resource.text.div : undefined;
  return (
    <section aria-labelledby="narrative-heading">
      <h2 id="narrative-heading">Narrative</h2>
      {div ? (
        <div class="narrative" dangerouslySetInnerHTML={{ __html: sanitiseNarrative(div) }} />
      ) : (
        <p class="muted">This resource has no narrative.</p>
      )}
    </section>
  );
}

function References({ resource }: { resource: Resource }): JSX.Element {
  const references = referencesOf(resource);
  return (
    <section aria-labelledby="references-heading">
      <h2 id="references-heading">References</h2>
      {references.length === 0 ? (
        <p class="muted">It refers to no other resource on this server.</p>
      ) : (
        <ul class="references">
          {references.map((r) => (
            <li>
              <code class="path">{r.path}</code> <ResourceLink type={r.type} id={r.id} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** Links shown under "Referred to by"; the rest are counted. */
const SHOWN_REFERRERS = 20;
/** Type names listed in a note before "and N more". */
const NAMED_TYPES = 6;

const namesOf = (types: readonly string[]) =>
  types.length > NAMED_TYPES
    ? `${types.slice(0, NAMED_TYPES).join(', ')} and ${types.length - NAMED_TYPES} more`
    : types.join(', ');

/** What refers to the resource: every type that can, that the account may search (referrers.ts). */
function ReferredBy({ type, id, scopes }: { type: string; id: string; scopes: readonly string[] }): JSX.Element {
  const [result, setResult] = useState<Referrers | string | undefined>();
  useEffect(() => {
    let live = true;
    findReferrers(type, id, scopes)
      .then((r) => live && setResult(r))
      .catch((e: unknown) => live && setResult(e instanceof Error ? e.message : String(e)));
    return () => {
      live = false;
    };
  }, [type, id]);
  return (
    <section aria-labelledby="referred-heading">
      <h2 id="referred-heading">Referred to by</h2>
      {result === undefined && <p class="muted">Searching…</p>}
      {typeof result === 'string' && <ErrorText message={result} />}
      {typeof result === 'object' && <ReferrerList type={type} result={result} />}
    </section>
  );
}

function ReferrerList({ type, result }: { type: string; result: Referrers }): JSX.Element {
  if (!result.searchable) {
    return <p class="muted">Finding what refers to it needs search access to {type}, which this account lacks.</p>;
  }
  const shown = firstOfEachType(result.found, SHOWN_REFERRERS);
  const rest = result.found.length - shown.length;
  const searched = result.notAllowed.length === 0 && result.failed.length === 0;
  return (
    <>
      {shown.length === 0 ? (
        <p class="muted">
          {searched ? 'No resource on this server refers to it.' : 'No resource of the types searched refers to it.'}
        </p>
      ) : (
        <ul class="references" aria-labelledby="referred-heading">
          {shown.map((r) => (
            <li>
              <ResourceLink type={r.type} id={r.id} />
            </li>
          ))}
          {(rest > 0 || !result.complete) && (
            <li class="muted">
              {result.complete
                ? `and ${formatCount(rest)} more`
                : `and ${rest > 0 ? `at least ${formatCount(rest)}` : 'some'} more (a search includes at most 1,000)`}
            </li>
          )}
        </ul>
      )}
      {result.notAllowed.length > 0 && (
        <p class="muted">
          Not searched, as this account may not search them: {namesOf(result.notAllowed)} ({result.notAllowed.length} of
          the {result.candidates} types that can refer to a {type}).
        </p>
      )}
      {result.failed.map((f) => (
        <ErrorText message={`Could not search ${namesOf(f.types)}: ${f.message}`} />
      ))}
    </>
  );
}

function History({ loaded }: { loaded: Loaded }): JSX.Element {
  const entries = loaded.history?.entries ?? [];
  const versions = entries.filter((e) => e.resource?.meta?.versionId);
  const [left, setLeft] = useState(versions[1]?.resource?.meta?.versionId ?? '');
  const [right, setRight] = useState(versions[0]?.resource?.meta?.versionId ?? '');
  useEffect(() => {
    setLeft(versions[1]?.resource?.meta?.versionId ?? '');
    setRight(versions[0]?.resource?.meta?.versionId ?? '');
  }, [loaded]);
  const byVersion = (v: string) => versions.find((e) => e.resource!.meta.versionId === v)?.resource;
  return (
    <section aria-labelledby="history-heading">
      <h2 id="history-heading">History</h2>
      {loaded.historyError && <ErrorText message={loaded.historyError} />}
      {entries.length > 0 && (
        <div class="table-wrap">
          <table class="history">
            <thead>
              <tr>
                <th scope="col">Version</th>
                <th scope="col">Change</th>
                <th scope="col">Last updated</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <tr>
                  <td>{e.resource?.meta?.versionId ?? versionOf(e.response?.etag)}</td>
                  <td>{changeOf(e.request?.method)}</td>
                  <td>{e.resource?.meta?.lastUpdated ?? e.response?.lastModified ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {loaded.history?.more && <p class="muted">The newest {HISTORY_COUNT} versions.</p>}
      {versions.length > 1 && (
        <div class="compare-block">
          <h3>Compare versions</h3>
          <div class="search">
            <VersionSelect
              id="compare-left"
              label="Older version"
              value={left}
              versions={versions}
              onChange={setLeft}
            />
            <VersionSelect
              id="compare-right"
              label="Newer version"
              value={right}
              versions={versions}
              onChange={setRight}
            />
          </div>
          {byVersion(left) && byVersion(right) && (
            <Comparison
              left={byVersion(left)}
              right={byVersion(right)}
              leftLabel={`Version ${left}`}
              rightLabel={`Version ${right}`}
            />
          )}
        </div>
      )}
    </section>
  );
}

/** A deletion has no resource: its version is its ETag's (`W/"3"`). */
const versionOf = (etag?: string) => /^W\/"(.+)"$/.exec(etag ?? '')?.[1] ?? '';
const changeOf = (method?: string) =>
  method === 'POST'
    ? 'created'
    : method === 'PUT'
      ? 'updated'
      : method === 'PATCH'
        ? 'patched'
        : method === 'DELETE'
          ? 'deleted'
          : (method ?? '');

function VersionSelect(props: {
  id: string;
  label: string;
  value: string;
  versions: HistoryEntry[];
  onChange: (v: string) => void;
}): JSX.Element {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <select id={props.id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.versions.map((e) => (
          <option value={e.resource!.meta.versionId}>Version {e.resource!.meta.versionId}</option>
        ))}
      </select>
    </div>
  );
}

function ConfirmDelete({ type, id, onCancel }: { type: string; id: string; onCancel: () => void }): JSX.Element {
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const confirm = async () => {
    setBusy(true);
    try {
      await api(`/fhir/${encodeURIComponent(type)}/${encodeURIComponent(id)}`, { method: 'DELETE' });
      navigate(`/resources?type=${encodeURIComponent(type)}`);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
      setBusy(false);
    }
  };
  return (
    <div class="confirm" role="alertdialog" aria-labelledby="confirm-title" aria-describedby="confirm-text">
      <h2 id="confirm-title">
        Delete {type}/{id}?
      </h2>
      <p id="confirm-text">
        A deleted resource is no longer read or found by searches; its history stays on the server.
      </p>
      {error && <ErrorText message={error} />}
      <div class="actions">
        <button type="button" class="danger" onClick={confirm} disabled={busy}>
          Yes, delete
        </button>
        <button type="button" onClick={onCancel} autofocus>
          Cancel
        </button>
      </div>
    </div>
  );
}
