// Small pieces the screens share.
import type { JSX } from 'preact';
import { formatValue, localReference } from './format';
import { consoleHref, followLink, resourcePath } from './router';

/** An error from the API, as the server worded it. */
export function ErrorText({ message }: { message: string }): JSX.Element {
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}

/** A link to a resource page. */
export function ResourceLink({ type, id, children }: { type: string; id: string; children?: string }) {
  const path = resourcePath(type, id);
  return (
    <a href={consoleHref(path)} onClick={(e) => followLink(e, path)}>
      {children ?? `${type}/${id}`}
    </a>
  );
}

/** A table cell's value: a reference to this server is a link to its page. */
export function CellValue({ value }: { value: unknown }): JSX.Element {
  const first = Array.isArray(value) && value.length === 1 ? value[0] : value;
  const target =
    first && typeof first === 'object' ? localReference((first as { reference?: unknown }).reference) : undefined;
  if (target)
    return (
      <ResourceLink type={target.type} id={target.id}>
        {formatValue(first)}
      </ResourceLink>
    );
  return <>{formatValue(value)}</>;
}
