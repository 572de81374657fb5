// Resources: pick a type the account may search, type a FHIR query string, see the matches as a table,
// page through them with the Bundle's own links. The type and query live in the address
// (/console/resources?type=Patient&q=name%3Dchalm), so a search can be reloaded or shared.
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { api, ApiError, fhirPathOf } from './api';
import type { Session } from './api';
import { columnsFor, RESOURCE_TYPES } from './columns';
import { Editor } from './editor';
import { elementValue, formatCount, formatValue } from './format';
import { CellValue, ErrorText } from './parts';
import { consoleHref, followLink, navigate, resourcePath } from './router';
import type { Route } from './router';
import { may, searchableTypes } from './scopes';

interface Bundle {
  total?: number;
  link?: { relation: string; url: string }[];
  entry?: { resource?: Record<string, any>; search?: { mode?: string } }[];
}

/** Cell texts up to this long stay on one line. */
const SHORT = 24;

const linkOf = (bundle: Bundle, relation: string) => bundle.link?.find((l) => l.relation === relation)?.url;

export function ResourcesScreen({ route, session }: { route: Route; session: Session }): JSX.Element {
  const types = useMemo(() => searchableTypes(session.scopes, RESOURCE_TYPES), [session]);
  const routeType = route.query.get('type') ?? '';
  const type = types.includes(routeType) ? routeType : types.includes('Patient') ? 'Patient' : (types[0] ?? '');
  const query = route.query.get('q') ?? '';
  const [draftType, setDraftType] = useState(type);
  const [draftQuery, setDraftQuery] = useState(query);
  const [creating, setCreating] = useState(false);
  useEffect(() => {
    setDraftType(type);
    setDraftQuery(query);
    setCreating(false);
  }, [type, query]);

  if (types.length === 0) {
    return (
      <section>
        <h1>Resources</h1>
        <p>This account's scopes allow no search of any resource type.</p>
      </section>
    );
  }
  const search = (event: SubmitEvent) => {
    event.preventDefault();
    const params = new URLSearchParams({ type: draftType });
    if (draftQuery.trim()) params.set('q', draftQuery.trim().replace(/^\?/, ''));
    navigate(`/resources?${params}`);
  };
  return (
    <section>
      <div class="title-row">
        <h1>Resources</h1>
        {may(session.scopes, draftType, 'c') && (
          <button type="button" onClick={() => setCreating(true)} disabled={creating}>
            New
          </button>
        )}
      </div>
      <form class="search" onSubmit={search} role="search">
        <div class="field">
          <div class="field-head">
            <label for="resource-type">Resource type</label>
            <TypeCount key={draftType} type={draftType} />
          </div>
          <select
            id="resource-type"
            value={draftType}
            onChange={(e) => setDraftType(e.currentTarget.value)}
            aria-describedby="type-count"
          >
            {types.map((t) => (
              <option value={t}>{t}</option>
            ))}
          </select>
        </div>
        <div class="field grow">
          <label for="search-parameters">Search parameters</label>
          <input
            id="search-parameters"
            value={draftQuery}
            onInput={(e) => setDraftQuery(e.currentTarget.value)}
            placeholder="name=chalmers&birthdate=ge1970"
            spellcheck={false}
            autocomplete="off"
          />
        </div>
        <button type="submit" class="primary">
          Search
        </button>
      </form>
      {creating ? (
        <Editor
          type={draftType}
          initial={{ resourceType: draftType }}
          scopes={session.scopes}
          onCancel={() => setCreating(false)}
          onSaved={(saved) => navigate(resourcePath(saved.resourceType, saved.id))}
        />
      ) : (
        <Results key={`${type}?${query}`} type={type} query={query} />
      )}
    </section>
  );
}

/** How long a picked type stays picked before it is counted: arrowing through the list asks nothing. */
const COUNT_DELAY_MS = 250;

/**
 * How many resources of the picked type the server holds (`_summary=count`: a count over the type's
 * rows, asked for the one type picked, never for every type at once).
 */
function TypeCount({ type }: { type: string }): JSX.Element {
  const [count, setCount] = useState<{ total?: number; error?: string } | undefined>();
  useEffect(() => {
    let live = true;
    const timer = setTimeout(() => {
      api<Bundle>(`/fhir/${encodeURIComponent(type)}?_summary=count`)
        .then((r) => live && setCount({ total: r.body.total }))
        .catch((e: unknown) => live && setCount({ error: e instanceof Error ? e.message : String(e) }));
    }, COUNT_DELAY_MS);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [type]);
  const text =
    count === undefined
      ? 'counting…'
      : count.total !== undefined
        ? `${formatCount(count.total)} in all`
        : `not counted${count.error ? `: ${count.error}` : ''}`;
  return (
    <span id="type-count" class="type-count" aria-live="polite" title={count?.error}>
      {text}
    </span>
  );
}

function Results({ type, query }: { type: string; query: string }): JSX.Element {
  const [path, setPath] = useState(`/fhir/${encodeURIComponent(type)}${query ? `?${query}` : ''}`);
  const [page, setPage] = useState<{ bundle: Bundle; number: number } | undefined>();
  const [number, setNumber] = useState(1);
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    let live = true;
    setError(undefined);
    api<Bundle>(path)
      .then((r) => live && setPage({ bundle: r.body, number }))
      .catch((e) => live && setError(e instanceof ApiError ? e.message : String(e)));
    return () => {
      live = false;
    };
  }, [path]);
  if (error) return <ErrorText message={error} />;
  if (!page) return <p class="muted">Searching…</p>;
  const { bundle } = page;
  const matches = (bundle.entry ?? []).filter((e) => e.resource && (e.search?.mode ?? 'match') === 'match');
  const go = (relation: string, step: number) => {
    const link = linkOf(bundle, relation);
    if (!link) return;
    setNumber(page.number + step);
    setPath(fhirPathOf(link));
  };
  return (
    <div class="results">
      <div class="results-head">
        <p aria-live="polite">
          {bundle.total !== undefined
            ? `${formatCount(bundle.total)} ${bundle.total === 1 ? 'match' : 'matches'}`
            : `${matches.length} on this page`}
          {page.number > 1 || linkOf(bundle, 'next') ? ` · page ${page.number}` : ''}
        </p>
        <div class="pager">
          <button type="button" onClick={() => go('previous', -1)} disabled={!linkOf(bundle, 'previous')}>
            Previous
          </button>
          <button type="button" onClick={() => go('next', 1)} disabled={!linkOf(bundle, 'next')}>
            Next
          </button>
        </div>
      </div>
      {matches.length === 0 ? <p class="muted">No {type} matches.</p> : <ResultTable type={type} matches={matches} />}
    </div>
  );
}

function ResultTable({ type, matches }: { type: string; matches: { resource?: Record<string, any> }[] }) {
  const columns = columnsFor(type);
  return (
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">{type} matches</caption>
        <thead>
          <tr>
            <th scope="col">Id</th>
            {columns.map((c) => (
              <th scope="col">{c.header}</th>
            ))}
            <th scope="col" class="updated">
              Last updated
            </th>
          </tr>
        </thead>
        <tbody>
          {matches.map(({ resource }) => {
            const r = resource!;
            const path = resourcePath(r.resourceType, r.id);
            return (
              <tr>
                <td>
                  <a href={consoleHref(path)} onClick={(e) => followLink(e, path)}>
                    {r.id}
                  </a>
                </td>
                {columns.map((c) => {
                  const value = c.elements.map((name) => elementValue(r, name)).find((v) => v !== undefined);
                  // Short values (dates, codes) on one line; long ones wrap.
                  return (
                    <td class={formatValue(value).length <= SHORT ? 'nowrap' : undefined}>
                      <CellValue value={value} />
                    </td>
                  );
                })}
                <td class="nowrap updated">
                  {formatValue(r.meta?.lastUpdated?.replace(/\.\d+/, '').replace('T', ' '))}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
